package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// opaDir holds OPA's command when a benchmark builds it.
var opaDir string

// newPGStore opens a store over a migrated throwaway PostgreSQL database.
func newPGStore(b *testing.B) storeopen.Store {
	b.Helper()
	url := pgtest.NewDatabase(b)
	if err := storeopen.Migrate(context.Background(), url); err != nil {
		b.Fatal(err)
	}
	store, err := storeopen.Open(context.Background(), url, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return store
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acsledger-bench-opa-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opaDir = dir
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// benchSessions is the concurrency of BenchmarkGuardianToolCall: 64
// sessions, each with one request in flight, as the target states.
// ACSLEDGER_BENCH_SESSIONS sets another, to see latency at lower load.
var benchSessions = 64

func init() {
	if v := os.Getenv("ACSLEDGER_BENCH_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			panic(fmt.Sprintf("ACSLEDGER_BENCH_SESSIONS=%q: want 1 to 1024", v))
		}
		benchSessions = n
	}
}

// BenchmarkGuardianToolCall measures HMAC-signed steps/toolCallRequest
// decisions from 64 concurrent sessions against an in-process Guardian over
// loopback HTTP, with the ledger in PostgreSQL (synchronous_commit=on, from
// internal/pgtest), beside bare in-process OPA evaluation (Engine.Decide) of
// the same baseline policy on the same inputs and as many goroutines, OPA's
// own server (opa-server) on those inputs over loopback HTTP, and the
// Guardian with evaluation memoized (guardian-memo). Each reports
// decisions/s and p50/p99 latency; b.N is the number of decisions.
//
//	go test ./internal/bench -run '^$' -bench BenchmarkGuardianToolCall -benchtime 3000x -count 1
func BenchmarkGuardianToolCall(b *testing.B) {
	ctx := context.Background()
	key, err := benchKey()
	if err != nil {
		b.Fatal(err)
	}
	report := func(b *testing.B, r *Result) {
		b.Helper()
		if r.ErrorCount() > 0 {
			b.Fatalf("%d errors (%s); first: %v", r.ErrorCount(), Counts(r.Errors), r.FirstErr)
		}
		if r.Decisions != b.N {
			b.Fatalf("%d decisions for b.N = %d", r.Decisions, b.N)
		}
		b.ReportMetric(r.Rate(), "decisions/s")
		b.ReportMetric(float64(r.Percentile(0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(r.Percentile(0.50).Microseconds())/1000, "p50-ms")
	}

	guardianRun := func(b *testing.B, wrap func(guardian.Policy) guardian.Policy) {
		store := newPGStore(b)
		bg, err := ServeGuardian(ctx, store, wrap)
		if err != nil {
			b.Fatal(err)
		}
		defer bg.Close()
		// appends/commit is the mean group-commit size while measuring.
		commits := func() int64 { return 0 }
		if pg, ok := store.(*pgstore.Store); ok {
			commits = pg.Commits
		}
		var c0 int64
		start := func() { c0 = commits(); b.ResetTimer() }
		r, err := DriveGuardian(ctx, bg.URL, bg.Key, benchSessions, time.Hour, int64(b.N), start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
		if n := commits() - c0; n > 0 {
			b.ReportMetric(float64(r.Decisions)/float64(n), "appends/commit")
		}
	}
	b.Run("guardian", func(b *testing.B) { guardianRun(b, nil) })
	// guardian-memo answers each distinct call with the baseline's decision
	// on its first occurrence: the Guardian's own cost (HTTP, signatures,
	// schema, chain, Postgres) without policy evaluation. Not a baseline for
	// the target; it shows how much of the gap is the policy.
	b.Run("guardian-memo", func(b *testing.B) {
		guardianRun(b, func(p guardian.Policy) guardian.Policy { return &memoPolicy{next: p} })
	})

	// opa-server is what a team runs instead of a Guardian: OPA's own
	// server (opa run --server, built from the OPA module in go.mod) with
	// the baseline bundle and console decision logging, driven over
	// loopback HTTP with the same inputs and concurrency.
	b.Run("opa-server", func(b *testing.B) {
		opa, err := StartOPAServer(ctx, opaBinary(b))
		if err != nil {
			b.Fatal(err)
		}
		defer opa.Close()
		r, err := DriveOPAServer(ctx, opa.URL, key, benchSessions, time.Hour, int64(b.N), b.ResetTimer)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
	})

	b.Run("bare-opa", func(b *testing.B) {
		e, err := policy.New(ctx, policy.Baseline(), DiscardRecorder{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := DriveBare(ctx, e, key, benchSessions, time.Hour, int64(b.N), b.ResetTimer)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
	})
}

// opaBinary builds OPA's command once per test process into a directory
// removed when the process ends (TestMain), and returns its path.
func opaBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := BuildOPA(opaDir)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// memoPolicy remembers the decision for each distinct method and payload.
// Only the benchmark uses it: the session-dependent parts of the input
// (position, chain head) do not change the baseline's decision on the
// Calls mix, which every answer is checked against.
type memoPolicy struct {
	next guardian.Policy
	memo sync.Map // string -> guardian.Decision
}

func (p *memoPolicy) Decide(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	k := in.Method + "\x00" + string(in.Payload)
	if d, ok := p.memo.Load(k); ok {
		return d.(guardian.Decision), nil
	}
	d, err := p.next.Decide(ctx, in)
	if err == nil {
		p.memo.Store(k, d)
	}
	return d, err
}

func benchKey() (*sig.PrivateKey, error) { return sig.GenerateKey(sig.HMACSHA256, "bench-hmac") }
