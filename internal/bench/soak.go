package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// Bounds of one soak run.
const (
	MaxSoakDuration = 24 * time.Hour
	MaxSoakRate     = 100_000
	// soakQueue is how many paced decisions may wait for a free session;
	// past it the pacer sheds them (counted): the server fell behind.
	soakQueue = 1024
)

// SoakConfig is one `acsledger bench soak` run.
type SoakConfig struct {
	// Store is the store's URL; empty: a throwaway embedded store.
	Store string
	// Rate is the paced decisions per second; 0: half the rate a
	// closed-loop probe of Probe measures first.
	Rate       float64
	Probe      time.Duration
	Sessions   int
	SessionLen int
	Duration   time.Duration
	Interval   time.Duration
	// Out is the directory of soak.csv, soak.svg and (with MemProfile)
	// soak.heap.
	Out        string
	MemProfile bool
	Log        *slog.Logger
}

// RunSoak is the bench guardian load, paced at a fixed rate (half the
// measured maximum unless Rate is given) for a long time, against an
// in-process Guardian whose Merkle log integrates and signs as under
// serve. It samples the process every Interval and says whether memory,
// goroutines, connections, descriptors and p99 latency stayed flat, and
// writes the samples as CSV and an SVG plot to Out. When ctx ends early
// it still summarizes and plots what it sampled.
//
// The sampled process holds both the server and the load generator; the
// generator's share is fixed (one goroutine per session, one connection
// each), so growth is the server's.
func RunSoak(ctx context.Context, c SoakConfig, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return fmt.Errorf("couldn't create --out: %w", err)
	}
	url, cleanup, err := storeOrTemp(c.Store, "acsledger-soak-")
	if err != nil {
		return err
	}
	defer cleanup()
	sg, err := startSoakGuardian(ctx, url)
	if err != nil {
		return err
	}
	defer sg.close()
	c.Log.Info("in-process guardian serving", "url", sg.URL, "store", storeopen.Redact(url))

	target := c.Rate
	var maxRate float64
	if target == 0 {
		fmt.Fprintf(stdout, "probe: %d sessions, closed loop, for %v\n", c.Sessions, c.Probe)
		r, err := DriveGuardian(ctx, sg.URL, sg.Key, c.Sessions, c.Probe, MaxRequests, nil)
		if err != nil {
			return err
		}
		r.print(stdout)
		if r.ErrorCount() > 0 {
			return fmt.Errorf("the probe had %d errors; first: %v", r.ErrorCount(), r.FirstErr)
		}
		maxRate = r.Rate()
		target = maxRate / 2
		if target <= 0 {
			return errors.New("the probe measured no decisions")
		}
	}
	fmt.Fprintf(stdout, "soak: %.0f decisions/s from %d sessions (%d decisions each) against %s/acs for %v, sampled every %v\n",
		target, c.Sessions, c.SessionLen, sg.URL, c.Duration, c.Interval)

	samples, firstErr := soak(ctx, sg, soakPlan{rate: target, sessions: c.Sessions, sessionLen: c.SessionLen, duration: c.Duration, interval: c.Interval})
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
	csvPath, svgPath := filepath.Join(c.Out, "soak.csv"), filepath.Join(c.Out, "soak.svg")
	if err := writeFileAtomic(csvPath, func(w io.Writer) error { return writeSoakCSV(w, samples) }); err != nil {
		return err
	}
	title := fmt.Sprintf("acsledger bench soak: %.0f decisions/s, %d sessions, %v, %s", target, c.Sessions, c.Duration, storeKind(url))
	if err := writeFileAtomic(svgPath, func(w io.Writer) error { return writeSoakSVG(w, title, samples) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", csvPath, svgPath)
	if c.MemProfile {
		heapPath := filepath.Join(c.Out, "soak.heap")
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
// signing its entries, as serve runs them, and what samples its store's
// connections.
type soakGuardian struct {
	*Guardian
	store   io.Closer
	mlog    *tlog.Log
	stopLog context.CancelFunc
	logDone chan error
	pg      *pgWatch // PostgreSQL stores
	file    string   // embedded stores: the database file
}

func startSoakGuardian(ctx context.Context, url string) (*soakGuardian, error) {
	// The soak keeps the whole store, as serve does, to wire the Merkle
	// log to it.
	if err := storeopen.Migrate(ctx, url); err != nil {
		return nil, fmt.Errorf("couldn't migrate %s: %w", storeopen.Redact(url), err)
	}
	store, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		return nil, fmt.Errorf("couldn't open store %s: %w", storeopen.Redact(url), err)
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
	bg, err := ServeGuardian(ctx, storeopen.NotifyOnAppend(store, mlog.Notify), nil)
	if err != nil {
		store.Close()
		return nil, err
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	sg := &soakGuardian{Guardian: bg, store: store, mlog: mlog, stopLog: stop, logDone: make(chan error, 1)}
	if t, err := storeopen.Parse(url); err == nil && t.Postgres != "" {
		sg.pg = newPGWatch(lctx, t.Postgres)
	} else if err == nil {
		sg.file = filepath.Join(t.Dir, storeopen.SQLiteFile)
	}
	go func() { sg.logDone <- mlog.Run(lctx) }()
	return sg, nil
}

// conns counts the store's open database connections, -1 if unknown.
func (s *soakGuardian) conns() int {
	if s.file != "" {
		return openFiles(s.file)
	}
	return s.pg.conns()
}

func (s *soakGuardian) close() {
	s.srv.Close()
	s.stopLog()
	<-s.logDone
	s.pg.close()
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
	client := newClient(plan.sessions)
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
			var s *acsagent.Session
			n := 0
			for range tickets {
				if s == nil || n == plan.sessionLen {
					if s != nil {
						if _, _, err := s.Send(ctx, "steps/sessionEnd", map[string]any{"payload": map[string]any{}}); err != nil && ctx.Err() == nil {
							record(0, err)
						}
					}
					var err error
					s, err = acsagent.New(sg.URL, fmt.Sprintf("soak-agent-%d", w), sg.Key, client)
					if err == nil {
						err = s.Open(ctx, map[string]any{})
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
				c := Calls[(w+n)%len(Calls)]
				n++
				t0 := time.Now()
				r, _, err := s.Send(ctx, "steps/toolCallRequest", acsagent.ToolCall(c.Tool, c.Args))
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					err = checkDecision(c.Tool, r.Decision, c.Want)
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
	s.dbConns = sg.conns()
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
