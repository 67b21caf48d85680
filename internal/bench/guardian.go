// Package bench measures the Guardian under load: `acsledger bench
// guardian` (HMAC-signed toolCallRequests from concurrent sessions against
// a Guardian over loopback HTTP, beside OPA's own server and bare
// in-process OPA evaluation of the same policy and inputs) and `acsledger
// bench soak` (the same load paced for a long time, sampling the process
// and plotting what it saw). The agents are internal/acsagent's.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// PeerOPAServer is the peer that a team runs instead of a Guardian: OPA's
// own server (`opa run --server`), with the shipped baseline bundle and
// decision logging on.
const PeerOPAServer = "opa-server"

// GuardianConfig is one `acsledger bench guardian` run.
type GuardianConfig struct {
	// URL is a running server's base URL and Key its HMAC key; empty: an
	// in-process Guardian over the store at Store (a throwaway embedded
	// store when that is empty too).
	URL   string
	Key   *sig.PrivateKey
	Store string
	// Sessions are the concurrencies measured in turn.
	Sessions []int
	Duration time.Duration
	Requests int64
	// Peer is "" or PeerOPAServer; OPA is then OPA's command.
	Peer string
	OPA  string
	// CPUProfile is where the last Guardian measurement's CPU profile goes.
	CPUProfile string
	Log        *slog.Logger
}

// RunGuardian measures the Guardian, then (with a peer) OPA's server,
// then bare OPA, at each concurrency, and prints each measurement, its
// CPU per decision and the same-run ratios, and a summary when there are
// several concurrencies.
func RunGuardian(ctx context.Context, c GuardianConfig, stdout, stderr io.Writer) error {
	base, key, pgURL := c.URL, c.Key, ""
	if base == "" {
		url, cleanup, err := storeOrTemp(c.Store, "acsledger-bench-")
		if err != nil {
			return err
		}
		defer cleanup()
		srv, err := startGuardian(ctx, url, c.Log)
		if err != nil {
			return err
		}
		defer srv.Close()
		base, key = srv.URL, srv.Key
		if t, err := storeopen.Parse(url); err == nil {
			pgURL = t.Postgres
		}
	}
	var opa *opaServer
	if c.Peer == PeerOPAServer {
		var err error
		if opa, err = StartOPAServer(ctx, c.OPA); err != nil {
			return err
		}
		defer opa.Close()
		c.Log.Info("opa server serving", "url", opa.URL, "bin", c.OPA)
	}
	engine, err := policy.New(ctx, policy.Baseline(), DiscardRecorder{}, nil)
	if err != nil {
		return err
	}
	pg := newPGWatch(ctx, pgURL)
	defer pg.close()

	var rows []row
	for i, sessions := range c.Sessions {
		profile := ""
		if i == len(c.Sessions)-1 {
			profile = c.CPUProfile
		}
		r, err := measure(ctx, stdout, stderr, setup{
			base: base, key: key, pg: pg, opa: opa, engine: engine,
			sessions: sessions, duration: c.Duration, requests: c.Requests, cpuProfile: profile,
		})
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	if len(rows) > 1 {
		printSummary(stdout, rows)
	}
	return nil
}

// setup is what one measurement at one concurrency drives.
type setup struct {
	base       string
	key        *sig.PrivateKey
	pg         *pgWatch   // the in-process Guardian's PostgreSQL, nil otherwise
	opa        *opaServer // nil without --peer opa-server
	engine     *policy.Engine
	sessions   int
	duration   time.Duration
	requests   int64
	cpuProfile string
}

// row is one concurrency's results, for the summary.
type row struct {
	sessions                  int
	guardian, opaServer, bare *Result
}

// measure measures the Guardian, OPA's server (if set up) and bare OPA
// at one concurrency, in that order, and prints each with its CPU per
// decision and the same-run ratios.
func measure(ctx context.Context, stdout, stderr io.Writer, s setup) (row, error) {
	row := row{sessions: s.sessions}
	fmt.Fprintf(stdout, "guardian: %d sessions against %s/acs for %v, baseline policy\n", s.sessions, s.base, s.duration)
	var started func()
	if s.cpuProfile != "" {
		f, err := os.Create(s.cpuProfile)
		if err != nil {
			return row, err
		}
		defer f.Close()
		started = func() {
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(stderr, "acsledger bench: no CPU profile: %v\n", err)
			}
		}
	}
	cpu := &cpuMeter{other: s.pg.pids()}
	gr, err := DriveGuardian(ctx, s.base, s.key, s.sessions, s.duration, s.requests, chain(cpu.start, started))
	if s.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return row, err
	}
	row.guardian = gr
	if err := report(stdout, gr, cpu, "postgres", "guardian"); err != nil {
		return row, err
	}

	if s.opa != nil {
		fmt.Fprintf(stdout, "opa-server: %d sessions against %s%s for %v, opa run --server, baseline bundle, console decision log\n", s.sessions, s.opa.URL, opaDecisionPath, s.duration)
		cpu := &cpuMeter{other: s.opa.pids}
		or, err := DriveOPAServer(ctx, s.opa.URL, s.key, s.sessions, s.duration, s.requests, cpu.start)
		if err != nil {
			return row, err
		}
		row.opaServer = or
		if err := report(stdout, or, cpu, "opa", "opa-server"); err != nil {
			return row, err
		}
	}

	fmt.Fprintf(stdout, "bare OPA: policy.Engine.Decide on %d goroutines for %v, same policy and inputs\n", s.sessions, s.duration)
	cpu = &cpuMeter{}
	br, err := DriveBare(ctx, s.engine, s.key, s.sessions, s.duration, s.requests, cpu.start)
	if err != nil {
		return row, err
	}
	row.bare = br
	report(stdout, br, cpu, "", "")
	if br.Rate() > 0 {
		fmt.Fprintf(stdout, "ratio guardian/bare-OPA: %.2f (decisions/s)\n", gr.Rate()/br.Rate())
	}
	if row.opaServer != nil && row.opaServer.Rate() > 0 {
		fmt.Fprintf(stdout, "ratio guardian/opa-server: %.2f (decisions/s)\n", gr.Rate()/row.opaServer.Rate())
	}
	return row, nil
}

// report prints a measurement and the CPU per decision of this process
// and of the other one cpu measured (named other), and refuses a
// measurement of what ("" for none) in which requests failed.
func report(w io.Writer, r *Result, cpu *cpuMeter, other, what string) error {
	r.print(w)
	cpu.print(w, r.Decisions, other)
	if what != "" && r.ErrorCount() > 0 {
		return fmt.Errorf("%d of %d %s requests failed", r.ErrorCount(), r.Decisions+r.ErrorCount(), what)
	}
	return nil
}

// chain returns a function calling each non-nil f in turn.
func chain(fs ...func()) func() {
	return func() {
		for _, f := range fs {
			if f != nil {
				f()
			}
		}
	}
}

// printSummary prints one line per concurrency: each measurement's
// decisions/s, p50 and p99, and the same-run ratios.
func printSummary(w io.Writer, rows []row) {
	fmt.Fprintln(w, "summary: decisions/s p50 p99 per measurement")
	for _, r := range rows {
		line := fmt.Sprintf("  sessions %4d  guardian %6.0f/s %8s %8s", r.sessions, r.guardian.Rate(), ms(r.guardian.Percentile(0.5)), ms(r.guardian.Percentile(0.99)))
		if r.opaServer != nil {
			line += fmt.Sprintf("  opa-server %6.0f/s %8s %8s", r.opaServer.Rate(), ms(r.opaServer.Percentile(0.5)), ms(r.opaServer.Percentile(0.99)))
		}
		line += fmt.Sprintf("  bare-opa %6.0f/s %8s %8s", r.bare.Rate(), ms(r.bare.Percentile(0.5)), ms(r.bare.Percentile(0.99)))
		if r.opaServer != nil && r.opaServer.Rate() > 0 {
			line += fmt.Sprintf("  guardian/opa-server %.2f", r.guardian.Rate()/r.opaServer.Rate())
		}
		fmt.Fprintln(w, line)
	}
}

// DiscardRecorder lets an engine run without a ledger: bare OPA
// measurements cite no recorded bundle.
type DiscardRecorder struct{}

func (DiscardRecorder) PutPolicyBundle(context.Context, ledger.PolicyBundle) error { return nil }

// Guardian is an in-process Guardian behind an HTTP server on a loopback
// port.
type Guardian struct {
	// URL is its base URL; Key the HMAC key its agents sign with.
	URL   string
	Key   *sig.PrivateKey
	store GuardianStore
	srv   *http.Server
}

// GuardianStore is what a benchmark Guardian needs of its store: what the
// Guardian writes and reads (guardian.Store), the policy bundle it records
// (policy.Recorder), and Close.
type GuardianStore interface {
	guardian.Store
	policy.Recorder
	Close() error
}

// startGuardian opens (and migrates) the store at storeURL and serves a
// baseline-policy Guardian with a fresh HMAC key on 127.0.0.1.
func startGuardian(ctx context.Context, storeURL string, log *slog.Logger) (*Guardian, error) {
	store, err := openStore(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	bg, err := ServeGuardian(ctx, store, nil)
	if err != nil {
		store.Close()
		return nil, err
	}
	log.Info("in-process guardian serving", "url", bg.URL, "store", storeopen.Redact(storeURL))
	return bg, nil
}

// storeOrTemp returns url, or when it is empty a new temporary directory
// for a throwaway embedded store, which cleanup removes.
func storeOrTemp(url, prefix string) (_ string, cleanup func(), err error) {
	if url != "" {
		return url, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// openStore migrates and opens the store at url for a benchmark Guardian.
func openStore(ctx context.Context, url string) (GuardianStore, error) {
	if err := storeopen.Migrate(ctx, url); err != nil {
		return nil, fmt.Errorf("couldn't migrate %s: %w", storeopen.Redact(url), err)
	}
	store, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		return nil, fmt.Errorf("couldn't open store %s: %w", storeopen.Redact(url), err)
	}
	return store, nil
}

// ServeGuardian serves a Guardian over store on 127.0.0.1. wrap, if not
// nil, wraps the baseline policy (benchmarks use it to take evaluation out
// of the measurement). Close closes the store too.
func ServeGuardian(ctx context.Context, store GuardianStore, wrap func(guardian.Policy) guardian.Policy) (*Guardian, error) {
	key, err := sig.GenerateKey(sig.HMACSHA256, "bench-hmac")
	if err != nil {
		return nil, err
	}
	engine, err := policy.New(ctx, policy.Baseline(), store, nil)
	if err != nil {
		return nil, err
	}
	keySet, err := sig.NewKeySet(key.Public())
	if err != nil {
		return nil, err
	}
	var pol guardian.Policy = opapolicy.New(engine)
	if wrap != nil {
		pol = wrap(pol)
	}
	g, err := guardian.New(guardian.Config{
		Store: store, Policy: pol, Keys: keySet,
		HMACKeys: []*sig.PrivateKey{key}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /acs", g)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &Guardian{URL: "http://" + ln.Addr().String(), Key: key, store: store, srv: srv}, nil
}

// Close stops the server and closes the store.
func (b *Guardian) Close() {
	b.srv.Close()
	b.store.Close()
}
