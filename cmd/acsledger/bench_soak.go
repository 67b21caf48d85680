package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// Bounds of one soak run.
const (
	maxSoakDuration = 24 * time.Hour
	maxSoakRate     = 100_000
	// soakQueue is how many paced decisions may wait for a free session;
	// past it the pacer sheds them (counted): the server fell behind.
	soakQueue = 1024
)

// runBenchSoak is `acsledger bench soak`: the bench guardian load, paced at
// a fixed rate (half the measured maximum unless --rate is given) for a long
// time, against an in-process Guardian whose Merkle log integrates and
// signs as under serve. It samples the process every --interval and says
// whether memory, goroutines, connections, descriptors and p99 latency
// stayed flat, and writes the samples as CSV and an SVG plot to --out.
//
// The sampled process holds both the server and the load generator; the
// generator's share is fixed (one goroutine per session, one connection
// each), so growth is the server's.
func runBenchSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench soak", stderr)
	db := fs.String("db", "", "store: postgres://... or a directory (default: a throwaway embedded store)")
	duration := fs.Duration("duration", 30*time.Minute, "how long the paced load runs")
	rate := fs.Float64("rate", 0, "decisions per second (default: half the rate measured by a closed-loop probe first)")
	sessions := fs.Int("sessions", 32, "concurrent sessions (each has at most one request in flight)")
	sessionLen := fs.Int("session-length", 1000, "decisions per session before it ends and a new one starts")
	interval := fs.Duration("interval", 10*time.Second, "sampling interval")
	probe := fs.Duration("probe", 15*time.Second, "how long the maximum rate is measured, without --rate")
	out := fs.String("out", ".", "directory for soak.csv and soak.svg")
	memProfile := fs.Bool("memprofile", false, "also write a heap profile at the end to soak.heap in --out (go tool pprof), to see what grew")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *sessions < 1 || *sessions > maxBenchSessions:
		return fmt.Errorf("%w: --sessions %d: must be 1 to %d", errUsage, *sessions, maxBenchSessions)
	case *duration <= 0 || *duration > maxSoakDuration:
		return fmt.Errorf("%w: --duration %v: must be positive and at most %v", errUsage, *duration, maxSoakDuration)
	case *rate < 0 || *rate > maxSoakRate || math.IsNaN(*rate):
		return fmt.Errorf("%w: --rate %v: must be 0 (measure) to %d", errUsage, *rate, maxSoakRate)
	case *interval < time.Second || *interval > *duration/2:
		return fmt.Errorf("%w: --interval %v: must be at least 1s and at most half of --duration", errUsage, *interval)
	case *rate == 0 && (*probe < time.Second || *probe > maxBenchDuration):
		return fmt.Errorf("%w: --probe %v: must be 1s to %v", errUsage, *probe, maxBenchDuration)
	case *sessionLen < 1:
		return fmt.Errorf("%w: --session-length %d: must be positive", errUsage, *sessionLen)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("couldn't create --out: %w", err)
	}
	log := newLogger(stderr)
	// Interrupting a long soak still summarizes and plots what it sampled.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	url := *db
	if url == "" {
		tmp, err := os.MkdirTemp("", "acsledger-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		url = tmp
	}
	sg, err := startSoakGuardian(ctx, url)
	if err != nil {
		return err
	}
	defer sg.close()
	log.Info("in-process guardian serving", "url", sg.url, "store", redact(url))

	target := *rate
	var maxRate float64
	if target == 0 {
		fmt.Fprintf(stdout, "probe: %d sessions, closed loop, for %v\n", *sessions, *probe)
		r, err := driveGuardian(ctx, sg.url, sg.key, *sessions, *probe, maxBenchRequests, nil)
		if err != nil {
			return err
		}
		r.print(stdout)
		if r.errorCount() > 0 {
			return fmt.Errorf("the probe had %d errors; first: %v", r.errorCount(), r.firstErr)
		}
		maxRate = r.rate()
		target = maxRate / 2
		if target <= 0 {
			return errors.New("the probe measured no decisions")
		}
	}
	fmt.Fprintf(stdout, "soak: %.0f decisions/s from %d sessions (%d decisions each) against %s/acs for %v, sampled every %v\n",
		target, *sessions, *sessionLen, sg.url, *duration, *interval)

	samples, firstErr := soak(ctx, sg, soakPlan{rate: target, sessions: *sessions, sessionLen: *sessionLen, duration: *duration, interval: *interval})
	if len(samples) == 0 {
		return firstErr
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		fmt.Fprintf(stdout, "interrupted after %v: the summary covers the samples taken\n", samples[len(samples)-1].at.Round(time.Second))
	} else if firstErr != nil {
		fmt.Fprintf(stderr, "acsledger bench soak: first error: %v\n", firstErr)
	}
	sum := summarize(samples, target, maxRate)
	sum.print(stdout)
	csvPath, svgPath := filepath.Join(*out, "soak.csv"), filepath.Join(*out, "soak.svg")
	if err := writeFileAtomic(csvPath, func(w io.Writer) error { return writeSoakCSV(w, samples) }); err != nil {
		return err
	}
	title := fmt.Sprintf("acsledger bench soak: %.0f decisions/s, %d sessions, %v, %s", target, *sessions, *duration, storeKind(url))
	if err := writeFileAtomic(svgPath, func(w io.Writer) error { return writeSoakSVG(w, title, samples) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", csvPath, svgPath)
	if *memProfile {
		heapPath := filepath.Join(*out, "soak.heap")
		runtime.GC()
		if err := writeFileAtomic(heapPath, func(w io.Writer) error { return pprof.Lookup("heap").WriteTo(w, 0) }); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", heapPath)
	}
	switch {
	case sum.errors > 0:
		return fmt.Errorf("%d decisions failed during the soak", sum.errors)
	case interrupted:
		return ctx.Err()
	}
	return nil
}

func storeKind(url string) string {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return "PostgreSQL"
	}
	return "embedded SQLite"
}

// writeFileAtomic writes path through a temporary file renamed into place,
// so a reader never sees half a plot.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		f.Close()
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("couldn't write %s: %w", path, err)
	}
	return nil
}

// soakGuardian is the bench Guardian plus the Merkle log integrating and
// signing its entries, as serve runs them.
type soakGuardian struct {
	*benchGuardian
	store   storeopen.Store
	mlog    *tlog.Log
	stopLog context.CancelFunc
	logDone chan error
}

func startSoakGuardian(ctx context.Context, url string) (*soakGuardian, error) {
	if err := storeopen.Migrate(ctx, url); err != nil {
		return nil, fmt.Errorf("couldn't migrate %s: %w", redact(url), err)
	}
	store, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		return nil, fmt.Errorf("couldn't open store %s: %w", redact(url), err)
	}
	skey, _, err := tlog.GenerateKey(rand.Reader, "soak.acsledger.invalid/log", tlog.Ed25519)
	if err != nil {
		store.Close()
		return nil, err
	}
	mlog, err := tlog.New(ctx, store.LogStorage(), tlog.Config{Origin: "soak.acsledger.invalid/log", Keys: []string{skey}})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("couldn't open the Merkle log: %w", err)
	}
	bg, err := serveBenchGuardian(ctx, storeopen.NotifyOnAppend(store, mlog.Notify), nil)
	if err != nil {
		store.Close()
		return nil, err
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	sg := &soakGuardian{benchGuardian: bg, store: store, mlog: mlog, stopLog: stop, logDone: make(chan error, 1)}
	go func() { sg.logDone <- mlog.Run(lctx) }()
	return sg, nil
}

func (s *soakGuardian) close() {
	s.srv.Close()
	s.stopLog()
	<-s.logDone
	s.store.Close()
}

// soakPlan is what one paced run does.
type soakPlan struct {
	rate       float64
	sessions   int
	sessionLen int
	duration   time.Duration
	interval   time.Duration
}

// soakSample is the state of the process at the end of one interval and
// what the load saw during it.
type soakSample struct {
	at         time.Duration // since the paced load started
	decisions  int
	errors     int
	shed       int
	latency    *latencyHistogram
	rssBytes   int64 // -1: unknown (no /proc)
	heapBytes  int64 // live heap after the last GC
	goroutines int
	dbConns    int // open connections of the store's pools; -1: unknown
	fds        int // -1: unknown
	treeSize   uint64
}

// soak drives sessions at plan.rate for plan.duration and samples the
// process every plan.interval. A pacer hands out one ticket per decision
// on schedule; each session takes the next ticket when it is free. The
// load is open-loop: a slow answer does not slow the schedule, and
// tickets no session takes within soakQueue are shed and counted. Besides
// the samples it returns the first failed decision's error, if any.
func soak(ctx context.Context, sg *soakGuardian, plan soakPlan) ([]soakSample, error) {
	client := benchClient(plan.sessions)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex // guards cur
		cur      = &soakSample{latency: newLatencyHistogram()}
		shed     atomic.Int64
		tickets  = make(chan struct{}, soakQueue)
		firstErr atomic.Pointer[error]
	)
	record := func(lat time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			cur.errors++
			firstErr.CompareAndSwap(nil, &err)
			return
		}
		cur.decisions++
		cur.latency.add(lat)
	}

	var wg sync.WaitGroup
	for w := range plan.sessions {
		wg.Go(func() {
			var s *agentSession
			n := 0
			for range tickets {
				if s == nil || n == plan.sessionLen {
					if s != nil {
						if _, _, err := s.send(ctx, "steps/sessionEnd", map[string]any{"payload": map[string]any{}}); err != nil && ctx.Err() == nil {
							record(0, err)
						}
					}
					var err error
					s, err = newAgentSession(sg.url, fmt.Sprintf("soak-agent-%d", w), sg.key, client)
					if err == nil {
						err = s.open(ctx, map[string]any{})
					}
					if err != nil {
						if ctx.Err() == nil {
							record(0, err)
						}
						s = nil
						continue
					}
					n = 0
				}
				c := benchCalls[(w+n)%len(benchCalls)]
				n++
				t0 := time.Now()
				r, _, err := s.send(ctx, "steps/toolCallRequest", toolCallBody(c.tool, c.args))
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					err = checkDecision(c.tool, r.Decision, c.want)
				}
				record(time.Since(t0), err)
			}
		})
	}

	start := time.Now()
	pacerDone := make(chan struct{})
	go func() {
		defer close(pacerDone)
		defer close(tickets)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var issued int64
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				el := now.Sub(start)
				if el >= plan.duration {
					return
				}
				for due := int64(el.Seconds() * plan.rate); issued < due; issued++ {
					select {
					case tickets <- struct{}{}:
					default:
						shed.Add(1)
					}
				}
			}
		}
	}()

	var samples []soakSample
	next := plan.interval
	sampleTimer := time.NewTimer(next)
	defer sampleTimer.Stop()
	var lastShed int64
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return samples, ctx.Err()
		case <-sampleTimer.C:
		}
		if next+plan.interval > plan.duration {
			// The last interval: let the pacer finish, and every ticket
			// it issued be answered, so the sample covers them.
			<-pacerDone
			wg.Wait()
			done = true
		}
		mu.Lock()
		s := cur
		cur = &soakSample{latency: newLatencyHistogram()}
		mu.Unlock()
		s.at = time.Since(start)
		s.latency.compact()
		n := shed.Load()
		s.shed, lastShed = int(n-lastShed), n
		sampleProcess(ctx, s, sg)
		samples = append(samples, *s)
		next += plan.interval
		sampleTimer.Reset(time.Until(start.Add(next)))
	}
	if p := firstErr.Load(); p != nil {
		return samples, *p
	}
	return samples, nil
}

// storePools are the connection pools a store may have: pgstore's pgx pool
// or sqlitestore's two database/sql pools.
type (
	pgxPooled interface{ Pool() *pgxpool.Pool }
	sqlPooled interface{ DBs() (write, read *sql.DB) }
)

// sampleProcess fills in the process figures of s.
func sampleProcess(ctx context.Context, s *soakSample, sg *soakGuardian) {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		s.heapBytes = int64(m[0].Value.Uint64())
	}
	s.goroutines = runtime.NumGoroutine()
	s.rssBytes = procRSS()
	s.fds = -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	s.dbConns = -1
	switch st := sg.store.(type) {
	case pgxPooled:
		s.dbConns = int(st.Pool().Stat().TotalConns())
	case sqlPooled:
		w, r := st.DBs()
		s.dbConns = w.Stats().OpenConnections + r.Stats().OpenConnections
	}
	if cp, err := sg.mlog.LatestCheckpoint(ctx); err == nil {
		s.treeSize = cp.Size
	}
}

// procRSS reads the resident set size from /proc/self/status (-1 if it
// cannot).
func procRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return -1
}

// latencyHistogram counts latencies in logarithmic buckets, 2% wide, from
// 10µs to about 2 minutes: percentiles within 2% in bounded memory, and
// histograms of intervals add up to the histogram of a window. counts[i]
// is bucket offset+i; a sample's histogram is compacted to the buckets it
// uses, so a long soak's samples stay small beside what it measures.
type latencyHistogram struct {
	offset int
	counts []int64
}

const (
	histMin    = 10 * time.Microsecond
	histGrowth = 1.02
	histBucket = 830 // histMin * 1.02^830 is about 140s
)

func newLatencyHistogram() *latencyHistogram {
	return &latencyHistogram{counts: make([]int64, histBucket+1)}
}

// add counts d; h must not be compacted.
func (h *latencyHistogram) add(d time.Duration) {
	i := 0
	if d > histMin {
		i = min(int(math.Log(float64(d)/float64(histMin))/math.Log(histGrowth))+1, histBucket)
	}
	h.counts[i]++
}

// compact drops the empty buckets below the first and above the last.
func (h *latencyHistogram) compact() {
	lo := slices.IndexFunc(h.counts, func(c int64) bool { return c != 0 })
	if lo < 0 {
		h.offset, h.counts = 0, nil
		return
	}
	hi := len(h.counts)
	for h.counts[hi-1] == 0 {
		hi--
	}
	h.offset += lo
	h.counts = slices.Clone(h.counts[lo:hi])
}

// merge adds o's counts to h, which must not be compacted.
func (h *latencyHistogram) merge(o *latencyHistogram) {
	for i, c := range o.counts {
		h.counts[o.offset+i] += c
	}
}

func (h *latencyHistogram) total() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// percentile returns the upper bound of the bucket holding the p-quantile.
func (h *latencyHistogram) percentile(p float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(p * float64(n)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= max(rank, 1) {
			return time.Duration(float64(histMin) * math.Pow(histGrowth, float64(h.offset+i)))
		}
	}
	return time.Duration(float64(histMin) * math.Pow(histGrowth, histBucket))
}

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

var soakCSVHeader = []string{"t_s", "decisions", "rate_per_s", "errors", "shed", "p50_ms", "p99_ms", "rss_mib", "heap_live_mib", "goroutines", "db_conns", "open_fds", "tree_size"}

func writeSoakCSV(w io.Writer, ss []soakSample) error {
	cw := csv.NewWriter(w)
	cw.Write(soakCSVHeader)
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
