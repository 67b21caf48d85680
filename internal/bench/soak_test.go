package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSoakFlatRule: each figure past its allowance makes a run not flat,
// and one within it does not.
func TestSoakFlatRule(t *testing.T) {
	const mib = 1 << 20
	base := soakWindow{rss: 100 * mib, heap: 20 * mib, goroutines: 50, dbConns: 8, fds: 40, p99: 10 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		change func(s *soakSummary)
		want   string // a reason's start; "" for flat
	}{
		{"unchanged", func(s *soakSummary) {}, ""},
		{"within allowances", func(s *soakSummary) {
			s.last.rss, s.last.heap = 140*mib, 32*mib
			s.last.goroutines, s.last.fds, s.last.dbConns = 60, 49, 12
			s.last.p99 = 17 * time.Millisecond
		}, ""},
		{"errors", func(s *soakSummary) { s.errors = 1 }, "1 errors"},
		{"shed", func(s *soakSummary) { s.shed = 3 }, "3 decisions shed"},
		{"behind the rate", func(s *soakSummary) { s.decisions = 890 }, "89 decisions/s achieved"},
		{"heap", func(s *soakSummary) { s.last.heap = 34 * mib }, "live heap grew"},
		{"rss", func(s *soakSummary) { s.last.rss = 142 * mib }, "RSS grew"},
		{"goroutines", func(s *soakSummary) { s.last.goroutines = 61 }, "goroutines grew"},
		{"descriptors", func(s *soakSummary) { s.last.fds = 50 }, "open descriptors grew"},
		{"connections", func(s *soakSummary) { s.last.dbConns = 13 }, "database connections grew"},
		{"p99", func(s *soakSummary) { s.last.p99 = 18 * time.Millisecond }, "p99 latency grew"},
		{"unknown figures are not compared", func(s *soakSummary) {
			s.first.rss, s.last.rss, s.first.fds, s.last.fds, s.first.dbConns, s.last.dbConns = -1, 500*mib, -1, 900, -1, 70
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := soakSummary{first: base, last: base, target: 100, decisions: 1000, elapsed: 10 * time.Second}
			tc.change(&s)
			got := flatReasons(s)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("not flat: %v", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("reasons %q, want one starting %q", got, tc.want)
			}
		})
	}
}

// TestLatencyHistogram: percentiles of the histogram are within its bucket
// width (2%) of the exact ones, and merged histograms equal the histogram
// of all values.
func TestLatencyHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a, b, all := newLatencyHistogram(), newLatencyHistogram(), newLatencyHistogram()
	var exact []time.Duration
	for i := range 20000 {
		d := time.Duration(r.ExpFloat64() * float64(5*time.Millisecond))
		exact = append(exact, d)
		all.add(d)
		if i%2 == 0 {
			a.add(d)
		} else {
			b.add(d)
		}
	}
	b.compact()
	if len(b.counts) >= len(all.counts)*6/10 {
		t.Errorf("compacting kept buckets %d..%d of %d", b.offset, b.offset+len(b.counts), len(all.counts))
	}
	if got, want := b.percentile(0.99), all.percentile(0.99); math.Abs(float64(got-want)) > 0.05*float64(want) {
		t.Errorf("half's p99 %v after compacting, the whole's %v", got, want)
	}
	a.merge(b)
	if !slices.Equal(a.counts, all.counts) {
		t.Error("merged halves differ from the whole")
	}
	slices.Sort(exact)
	for _, p := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := exact[int(p*float64(len(exact)))-1]
		got := all.percentile(p)
		if got < want || float64(got) > float64(want)*1.021 {
			t.Errorf("p%v = %v, exact %v", p*100, got, want)
		}
	}
	if got := newLatencyHistogram().percentile(0.99); got != 0 {
		t.Errorf("empty histogram p99 = %v", got)
	}
}
