package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/bench"
	"github.com/acsledger/acsledger/internal/pgtest"
)

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

// opaBinary builds OPA's command once per test process, beside the
// acsledger binary TestMain builds (and removes), and returns its path.
func opaBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := bench.BuildOPA(filepath.Dir(binary))
	if err != nil {
		tb.Fatal(err)
	}
	return bin
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

// checkMixes checks every reported decision count against the bench.Calls
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
			t.Errorf("decision mix allow %d, deny %d, modify %d is not the bench.Calls mix:\n%s", allow, deny, modify, out)
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
