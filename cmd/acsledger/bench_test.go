package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
//	go test ./cmd/acsledger -run '^$' -bench BenchmarkGuardianToolCall -benchtime 3000x -count 1
func BenchmarkGuardianToolCall(b *testing.B) {
	ctx := context.Background()
	key, err := benchKey()
	if err != nil {
		b.Fatal(err)
	}
	report := func(b *testing.B, r *loadResult) {
		b.Helper()
		if r.errorCount() > 0 {
			b.Fatalf("%d errors (%s); first: %v", r.errorCount(), counts(r.errors), r.firstErr)
		}
		if r.decisions != b.N {
			b.Fatalf("%d decisions for b.N = %d", r.decisions, b.N)
		}
		b.ReportMetric(r.rate(), "decisions/s")
		b.ReportMetric(float64(r.percentile(0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(r.percentile(0.50).Microseconds())/1000, "p50-ms")
	}

	guardianRun := func(b *testing.B, wrap func(guardian.Policy) guardian.Policy) {
		url := pgtest.NewDatabase(b)
		if err := storeopen.Migrate(ctx, url); err != nil {
			b.Fatal(err)
		}
		store, err := storeopen.Open(ctx, url, ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		bg, err := serveBenchGuardian(ctx, store, wrap)
		if err != nil {
			b.Fatal(err)
		}
		defer bg.close()
		// appends/commit is the mean group-commit size while measuring.
		commits := func() int64 { return 0 }
		if pg, ok := store.(*pgstore.Store); ok {
			commits = pg.Commits
		}
		var c0 int64
		start := func() { c0 = commits(); b.ResetTimer() }
		r, err := driveGuardian(ctx, bg.url, bg.key, benchSessions, time.Hour, int64(b.N), start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
		if n := commits() - c0; n > 0 {
			b.ReportMetric(float64(r.decisions)/float64(n), "appends/commit")
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
		opa, err := startOPAServer(ctx, opaBinary(b))
		if err != nil {
			b.Fatal(err)
		}
		defer opa.close()
		r, err := driveOPAServer(ctx, opa.url, key, benchSessions, time.Hour, int64(b.N), b.ResetTimer)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
	})

	b.Run("bare-opa", func(b *testing.B) {
		e, err := policy.New(ctx, policy.Baseline(), discardRecorder{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := driveBare(ctx, e, key, benchSessions, time.Hour, int64(b.N), b.ResetTimer)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		report(b, r)
	})
}

// TestBenchCommand runs `acsledger bench guardian` in-process against both
// stores and checks what it reports: the expected mix of decisions from both
// the Guardian and bare OPA, no errors, and the ratio.
func TestBenchCommand(t *testing.T) {
	stores(t, func(t *testing.T, db string) {
		var out, errs bytes.Buffer
		prof := filepath.Join(t.TempDir(), "cpu.pprof")
		code := run(t.Context(), []string{"bench", "guardian", "--db", db, "--sessions", "4", "--duration", "10s", "--requests", "200", "--cpuprofile", prof}, &out, &errs)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
		}
		checkBenchOutput(t, out.String())
		// A pprof profile is gzip-compressed protobuf.
		if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("--cpuprofile wrote no profile: %v, %d bytes", err, len(b))
		}
	})
}

// TestBenchCommandPeer runs `acsledger bench guardian --peer opa-server`
// at two concurrencies against Postgres and checks that OPA's server, a
// real `opa run --server` child, answered the whole mix with decisions
// logged, beside the Guardian and bare OPA, and that the summary and
// ratio lines are there.
func TestBenchCommandPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds OPA's command")
	}
	bin := opaBinary(t)
	db := pgtest.NewDatabase(t)
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"bench", "guardian", "--db", db, "--peer", "opa-server", "--opa", bin,
		"--sessions", "1,3", "--duration", "10s", "--requests", "60"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	o := out.String()
	if got := len(benchDecisions.FindAllString(o, -1)); got != 6 {
		t.Errorf("want 6 error-free decision mixes (guardian, opa-server, bare OPA at 1 and 3 sessions), got %d:\n%s", got, o)
	}
	checkMixes(t, o)
	for _, want := range []string{
		"opa-server: 1 sessions against http://127.0.0.1:", "opa-server: 3 sessions against",
		"/v1/data/acs/decision", "  60 decisions in", "cpu per decision: this process", ", postgres ", ", opa ",
		"summary: decisions/s p50 p99", "  sessions    1  guardian", "  sessions    3  guardian",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("the report lacks %q:\n%s", want, o)
		}
	}
	if m := regexp.MustCompile(`ratio guardian/opa-server: (\d+\.\d\d)`).FindAllStringSubmatch(o, -1); len(m) != 2 {
		t.Errorf("want a guardian/opa-server ratio per concurrency:\n%s", o)
	} else if v, _ := strconv.ParseFloat(m[0][1], 64); v <= 0 {
		t.Errorf("ratio %s", m[0][1])
	}
}

// TestBenchPeerRefused: a --peer other than opa-server, or an opa command
// that does not exist, stops the run before any measurement.
func TestBenchPeerRefused(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"bench", "guardian", "--peer", "envoy"}, &out, &errs); code != 2 || out.Len() != 0 {
		t.Errorf("--peer envoy: exit %d, output %q", code, out.String())
	}
	out.Reset()
	errs.Reset()
	missing := filepath.Join(t.TempDir(), "no-opa")
	if code := run(t.Context(), []string{"bench", "guardian", "--peer", "opa-server", "--opa", missing, "--requests", "10"}, &out, &errs); code == 0 || strings.Contains(out.String(), "decisions in") {
		t.Errorf("--opa %s: exit %d, output %q", missing, code, out.String())
	}
	if !strings.Contains(errs.String(), "go build -o opa github.com/open-policy-agent/opa") {
		t.Errorf("the error does not say how to build opa:\n%s", errs.String())
	}
}

var (
	opaBuild    sync.Once
	opaBuilt    string
	opaBuildErr error
)

// opaBinary builds OPA's command from the OPA module in go.mod (a tool of
// this module: go tool opa) once per test process, beside the acsledger
// binary TestMain builds (and removes), and returns its path.
func opaBinary(tb testing.TB) string {
	tb.Helper()
	opaBuild.Do(func() {
		opaBuilt = filepath.Join(filepath.Dir(binary), "opa")
		if out, err := exec.Command("go", "build", "-o", opaBuilt, "github.com/open-policy-agent/opa").CombinedOutput(); err != nil {
			opaBuildErr = fmt.Errorf("go build github.com/open-policy-agent/opa: %v\n%s", err, out)
		}
	})
	if opaBuildErr != nil {
		tb.Fatal(opaBuildErr)
	}
	return opaBuilt
}

// TestBenchCommandURL drives a real `acsledger serve` through --url, with
// the HMAC key read from the server's key directory.
func TestBenchCommandURL(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--db", dir)
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"bench", "guardian", "--url", s.url, "--keys", dir + "/keys", "--sessions", "3", "--duration", "10s", "--requests", "60"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s\nserver:\n%s", code, out.String(), errs.String(), s.log())
	}
	checkBenchOutput(t, out.String())
	if !strings.Contains(out.String(), s.url+"/acs") {
		t.Errorf("the report does not name the server it drove:\n%s", out.String())
	}
}

var (
	benchDecisions = regexp.MustCompile(`decisions: allow (\d+), deny (\d+), modify (\d+)\n  errors: 0\n`)
	benchRatio     = regexp.MustCompile(`ratio guardian/bare-OPA: (\d+\.\d\d)`)
)

func checkBenchOutput(t *testing.T, out string) {
	t.Helper()
	if m := benchDecisions.FindAllStringSubmatch(out, -1); len(m) != 2 {
		t.Fatalf("want decision counts with no errors for the Guardian and bare OPA:\n%s", out)
	}
	checkMixes(t, out)
	r := benchRatio.FindStringSubmatch(out)
	if r == nil {
		t.Fatalf("no ratio line:\n%s", out)
	}
	if v, _ := strconv.ParseFloat(r[1], 64); v <= 0 {
		t.Errorf("ratio %s", r[1])
	}
}

// checkMixes checks every reported decision count against the benchCalls
// mix.
func checkMixes(t *testing.T, out string) {
	t.Helper()
	for _, c := range benchDecisions.FindAllStringSubmatch(out, -1) {
		allow, _ := strconv.Atoi(c[1])
		deny, _ := strconv.Atoi(c[2])
		modify, _ := strconv.Atoi(c[3])
		n := allow + deny + modify
		// The mix is 6 allow, 2 deny, 2 modify in 10, rotated per worker.
		if n == 0 || math.Abs(float64(allow)/float64(n)-0.6) > 0.1 || deny == 0 || modify == 0 {
			t.Errorf("decision mix allow %d, deny %d, modify %d is not the benchCalls mix:\n%s", allow, deny, modify, out)
		}
	}
}

// TestBenchRefusesRemote: the load generator drives loopback servers only,
// and its bounds are enforced before anything runs.
func TestBenchRefusesRemote(t *testing.T) {
	for _, args := range [][]string{
		{"--url", "http://203.0.113.7:8080"},
		{"--url", "http://example.com"},
		{"--sessions", "0"},
		{"--sessions", "5000"},
		{"--sessions", "1,x"},
		{"--sessions", "4,0"},
		{"--duration", "1h"},
		{"--policy", "mine"},
		{"--url", "http://127.0.0.1:1", "--db", "x"},
	} {
		var out, errs bytes.Buffer
		if code := run(t.Context(), append([]string{"bench", "guardian"}, args...), &out, &errs); code != 2 || out.Len() != 0 {
			t.Errorf("bench guardian %v: exit %d, output %q, want usage error 2 and nothing run\n%s", args, code, out.String(), errs.String())
		}
	}
}

// memoPolicy remembers the decision for each distinct method and payload.
// Only the benchmark uses it: the session-dependent parts of the input
// (position, chain head) do not change the baseline's decision on the
// benchCalls mix, which every answer is checked against.
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
