package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// soakWindow is the figures of a run of consecutive samples: the lowest of
// each process figure, and latency percentiles over all its decisions. A
// leak raises the floor of a figure; requests in flight when a sample is
// taken only raise its peaks, so the floor is what is compared.
type soakWindow struct {
	from, to                 time.Duration
	rss, heap                int64
	goroutines, dbConns, fds int
	p50, p99                 time.Duration
	decisions                int
}

func window(ss []soakSample) soakWindow {
	w := soakWindow{from: ss[0].at, to: ss[len(ss)-1].at}
	h := newLatencyHistogram()
	var rss, heap, gor, conns, fds []int64
	for _, s := range ss {
		h.merge(s.latency)
		w.decisions += s.decisions
		rss = append(rss, s.rssBytes)
		heap = append(heap, s.heapBytes)
		gor = append(gor, int64(s.goroutines))
		conns = append(conns, int64(s.dbConns))
		fds = append(fds, int64(s.fds))
	}
	w.rss, w.heap = slices.Min(rss), slices.Min(heap)
	w.goroutines, w.dbConns, w.fds = int(slices.Min(gor)), int(slices.Min(conns)), int(slices.Min(fds))
	w.p50, w.p99 = h.percentile(0.50), h.percentile(0.99)
	return w
}

// soakSummary compares the first window of a run with its last.
type soakSummary struct {
	target, maxRate   float64
	decisions, errors int
	shed              int
	elapsed           time.Duration
	first, last       soakWindow
	treeSize          uint64
	reasons           []string // why the run is not flat; empty when it is
}

// The flat rule. The first window is the samples of the run's second fifth
// (the first fifth is warm-up: pools fill, the heap finds its size); the
// last window is its last fifth. The run is flat when it had no error,
// shed no decision, kept at least 90% of the target rate, and from the
// first window to the last:
//   - live heap grew by at most 25% + 8 MiB, RSS by at most 25% + 16 MiB;
//   - goroutines and open descriptors by at most 10% + 5;
//   - open database connections by at most 25% + 2;
//   - p99 latency by at most 50% + 2ms (the box is shared: latency swings).
func flatReasons(s soakSummary) []string {
	var r []string
	if s.errors > 0 {
		r = append(r, fmt.Sprintf("%d errors", s.errors))
	}
	if s.shed > 0 {
		r = append(r, fmt.Sprintf("%d decisions shed (the server fell behind the rate)", s.shed))
	}
	if s.elapsed > 0 && float64(s.decisions)/s.elapsed.Seconds() < 0.9*s.target {
		r = append(r, fmt.Sprintf("%.0f decisions/s achieved, below 90%% of the target %.0f (the server fell behind)", float64(s.decisions)/s.elapsed.Seconds(), s.target))
	}
	const mib = 1 << 20
	grew := func(name string, first, last, frac, slack float64, unit string) {
		if last > first*(1+frac)+slack {
			r = append(r, fmt.Sprintf("%s grew from %.1f%s to %.1f%s (allowed %.1f%s)", name, first, unit, last, unit, first*(1+frac)+slack, unit))
		}
	}
	f, l := s.first, s.last
	grew("live heap", float64(f.heap)/mib, float64(l.heap)/mib, 0.25, 8, " MiB")
	if f.rss >= 0 && l.rss >= 0 {
		grew("RSS", float64(f.rss)/mib, float64(l.rss)/mib, 0.25, 16, " MiB")
	}
	grew("goroutines", float64(f.goroutines), float64(l.goroutines), 0.10, 5, "")
	if f.fds >= 0 && l.fds >= 0 {
		grew("open descriptors", float64(f.fds), float64(l.fds), 0.10, 5, "")
	}
	if f.dbConns >= 0 && l.dbConns >= 0 {
		grew("database connections", float64(f.dbConns), float64(l.dbConns), 0.25, 2, "")
	}
	grew("p99 latency", msf(f.p99), msf(l.p99), 0.50, 2, "ms")
	return r
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func summarize(ss []soakSample, target, maxRate float64) soakSummary {
	s := soakSummary{target: target, maxRate: maxRate, elapsed: ss[len(ss)-1].at, treeSize: ss[len(ss)-1].treeSize}
	for _, x := range ss {
		s.decisions += x.decisions
		s.errors += x.errors
		s.shed += x.shed
	}
	fifth := max(len(ss)/5, 1)
	firstFrom := min(fifth, len(ss)-1)
	s.first = window(ss[firstFrom:min(firstFrom+fifth, len(ss))])
	s.last = window(ss[len(ss)-fifth:])
	s.reasons = flatReasons(s)
	return s
}

func (s soakSummary) print(w io.Writer) {
	fmt.Fprintf(w, "summary: %d decisions in %v: %.0f decisions/s (target %.0f", s.decisions, s.elapsed.Round(time.Second), float64(s.decisions)/s.elapsed.Seconds(), s.target)
	if s.maxRate > 0 {
		fmt.Fprintf(w, ", half the measured %.0f", s.maxRate)
	}
	fmt.Fprintf(w, "); errors %d; shed %d; Merkle tree size %d\n", s.errors, s.shed, s.treeSize)
	const mib = 1 << 20
	fmt.Fprintf(w, "  %-22s %12s %12s\n", "window", winLabel(s.first), winLabel(s.last))
	row := func(name, a, b string) { fmt.Fprintf(w, "  %-22s %12s %12s\n", name, a, b) }
	row("RSS MiB", fmt.Sprintf("%.1f", float64(s.first.rss)/mib), fmt.Sprintf("%.1f", float64(s.last.rss)/mib))
	row("live heap MiB", fmt.Sprintf("%.1f", float64(s.first.heap)/mib), fmt.Sprintf("%.1f", float64(s.last.heap)/mib))
	row("goroutines", strconv.Itoa(s.first.goroutines), strconv.Itoa(s.last.goroutines))
	row("db connections", strconv.Itoa(s.first.dbConns), strconv.Itoa(s.last.dbConns))
	row("open descriptors", strconv.Itoa(s.first.fds), strconv.Itoa(s.last.fds))
	row("p50 ms", fmt.Sprintf("%.2f", msf(s.first.p50)), fmt.Sprintf("%.2f", msf(s.last.p50)))
	row("p99 ms", fmt.Sprintf("%.2f", msf(s.first.p99)), fmt.Sprintf("%.2f", msf(s.last.p99)))
	if len(s.reasons) == 0 {
		fmt.Fprintln(w, "verdict: flat")
		return
	}
	fmt.Fprintf(w, "verdict: not flat: %s\n", strings.Join(s.reasons, "; "))
}

func winLabel(w soakWindow) string {
	return fmt.Sprintf("%ds-%ds", int(w.from.Seconds()+0.5), int(w.to.Seconds()+0.5))
}

// SoakCSVHeader is the first line of soak.csv: one column per figure of a sample.
var SoakCSVHeader = []string{"t_s", "decisions", "rate_per_s", "errors", "shed", "p50_ms", "p99_ms", "rss_mib", "heap_live_mib", "goroutines", "db_conns", "open_fds", "tree_size"}

func writeSoakCSV(w io.Writer, ss []soakSample) error {
	cw := csv.NewWriter(w)
	cw.Write(SoakCSVHeader)
	prev := time.Duration(0)
	for _, s := range ss {
		secs := (s.at - prev).Seconds()
		prev = s.at
		cw.Write([]string{
			fmt.Sprintf("%.1f", s.at.Seconds()), strconv.Itoa(s.decisions), fmt.Sprintf("%.1f", float64(s.decisions)/secs),
			strconv.Itoa(s.errors), strconv.Itoa(s.shed),
			fmt.Sprintf("%.3f", msf(s.latency.percentile(0.50))), fmt.Sprintf("%.3f", msf(s.latency.percentile(0.99))),
			mibString(s.rssBytes), mibString(s.heapBytes),
			strconv.Itoa(s.goroutines), strconv.Itoa(s.dbConns), strconv.Itoa(s.fds), strconv.FormatUint(s.treeSize, 10),
		})
	}
	cw.Flush()
	return cw.Error()
}

func mibString(b int64) string {
	if b < 0 {
		return "-1"
	}
	return fmt.Sprintf("%.2f", float64(b)/(1<<20))
}

// svgSeries is one line of a plot panel.
type svgSeries struct {
	name   string
	color  string
	values []float64
}

// writeSoakSVG draws the samples as four panels over a shared time axis:
// memory, goroutines/connections/descriptors, latency, and rate/errors.
func writeSoakSVG(w io.Writer, title string, ss []soakSample) error {
	col := func(f func(s soakSample) float64) []float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		return v
	}
	unit, scale := "minutes", time.Minute
	if len(ss) > 0 && ss[len(ss)-1].at < 5*time.Minute {
		unit, scale = "seconds", time.Second
	}
	t := col(func(s soakSample) float64 { return float64(s.at) / float64(scale) })
	prev := time.Duration(0)
	rates := make([]float64, len(ss))
	failed := make([]float64, len(ss))
	for i, s := range ss {
		secs := (s.at - prev).Seconds()
		rates[i] = float64(s.decisions) / secs
		failed[i] = float64(s.errors+s.shed) / secs
		prev = s.at
	}
	panels := []struct {
		label  string
		series []svgSeries
	}{
		{"memory (MiB)", []svgSeries{
			{"RSS", "#1f77b4", col(func(s soakSample) float64 { return float64(s.rssBytes) / (1 << 20) })},
			{"live heap", "#ff7f0e", col(func(s soakSample) float64 { return float64(s.heapBytes) / (1 << 20) })},
		}},
		{"count", []svgSeries{
			{"goroutines", "#2ca02c", col(func(s soakSample) float64 { return float64(s.goroutines) })},
			{"open fds", "#9467bd", col(func(s soakSample) float64 { return float64(s.fds) })},
			{"db conns", "#8c564b", col(func(s soakSample) float64 { return float64(s.dbConns) })},
		}},
		{"latency (ms)", []svgSeries{
			{"p99", "#d62728", col(func(s soakSample) float64 { return msf(s.latency.percentile(0.99)) })},
			{"p50", "#17becf", col(func(s soakSample) float64 { return msf(s.latency.percentile(0.50)) })},
		}},
		{"per second", []svgSeries{
			{"decisions", "#1f77b4", rates},
			{"errors+shed", "#d62728", failed},
		}},
	}
	const (
		width, left, right = 900.0, 70.0, 160.0
		top, panelH, gap   = 60.0, 150.0, 40.0
	)
	height := top + float64(len(panels))*(panelH+gap) + 10
	plotW := width - left - right
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">%s</text>`+"\n", left, html.EscapeString(title))
	tMax := 0.0
	if len(t) > 0 {
		tMax = t[len(t)-1]
	}
	if tMax <= 0 {
		tMax = 1
	}
	for i, p := range panels {
		y0 := top + float64(i)*(panelH+gap)
		vMax := 0.0
		for _, s := range p.series {
			for _, v := range s.values {
				vMax = math.Max(vMax, v)
			}
		}
		vMax = niceCeil(vMax)
		fmt.Fprintf(&b, `<g><rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left, y0-6, html.EscapeString(p.label))
		for _, frac := range []float64{0, 0.5, 1} {
			y := y0 + panelH - frac*panelH
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, strconv.FormatFloat(frac*vMax, 'g', 4, 64))
			if frac == 0.5 {
				fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", left, y, left+plotW, y)
			}
		}
		for j, s := range p.series {
			var pts strings.Builder
			for k, v := range s.values {
				if v < 0 {
					continue // unknown on this platform
				}
				fmt.Fprintf(&pts, "%.1f,%.1f ", left+t[k]/tMax*plotW, y0+panelH-v/vMax*panelH)
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.TrimSpace(pts.String()))
			ly := y0 + 14 + float64(j)*16
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/>`, left+plotW+10, ly-4, left+plotW+28, ly-4, s.color)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left+plotW+32, ly, html.EscapeString(s.name))
		}
		if i == len(panels)-1 {
			for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", left+frac*plotW, y0+panelH+16, strconv.FormatFloat(frac*tMax, 'g', 3, 64))
			}
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", left+plotW/2, y0+panelH+32, unit)
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
