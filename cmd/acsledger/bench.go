package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/bench"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// runBench is `acsledger bench guardian|soak` (package internal/bench).
// guardian: HMAC-signed toolCallRequests from concurrent sessions against
// a Guardian over loopback HTTP, then (with --peer opa-server) OPA's own
// server and bare in-process OPA evaluation of the same policy and inputs,
// and the ratios of the rates. soak: runBenchSoak.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "soak" {
		return runBenchSoak(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "guardian" {
		return fmt.Errorf("%w: the benchmarks are 'acsledger bench guardian' and 'acsledger bench soak'", errUsage)
	}
	fs := newFlagSet("bench guardian", stderr)
	target := fs.String("url", "", "drive the running server at this loopback base URL (e.g. http://127.0.0.1:8080) instead of starting one; its ledger keeps the sessions")
	db := fs.String("db", "", "store for the in-process Guardian: postgres://... or a directory (default: a throwaway embedded store)")
	keys := fs.String("keys", "", "with --url: the server's key directory, for its HMAC key (default ./acsledger-data/keys)")
	sessionList := fs.String("sessions", "64", "concurrent sessions (and bare-OPA goroutines); a comma-separated `list` (1,4,16,64) measures each in turn")
	duration := fs.Duration("duration", 10*time.Second, "how long each measurement runs")
	requests := fs.Int("requests", bench.MaxRequests, "stop each measurement after this many decisions")
	pol := fs.String("policy", "baseline", "policy bundle; only the shipped baseline is supported")
	peer := fs.String("peer", "", "also measure `PEER` with the same load: opa-server (OPA's own server, opa run --server, with decision logging)")
	opaBin := fs.String("opa", "opa", "with --peer opa-server: OPA's command (go build -o opa github.com/open-policy-agent/opa)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the Guardian measurement to `FILE` (go tool pprof); with --url it covers only the client; with several --sessions, the last")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	sessionCounts, err := bench.ParseSessions(*sessionList)
	switch {
	case err != nil:
		return fmt.Errorf("%w: --sessions %q: %v", errUsage, *sessionList, err)
	case *pol != "baseline":
		return fmt.Errorf("%w: --policy %q: only baseline is supported", errUsage, *pol)
	case *duration <= 0 || *duration > bench.MaxDuration:
		return fmt.Errorf("%w: --duration %v: must be positive and at most %v", errUsage, *duration, bench.MaxDuration)
	case *requests < 1 || *requests > bench.MaxRequests:
		return fmt.Errorf("%w: --requests %d: must be 1 to %d", errUsage, *requests, bench.MaxRequests)
	case *target != "" && *db != "":
		return fmt.Errorf("%w: --url and --db exclude each other", errUsage)
	case *peer != "" && *peer != bench.PeerOPAServer:
		return fmt.Errorf("%w: --peer %q: the only peer is %s", errUsage, *peer, bench.PeerOPAServer)
	}
	c := bench.GuardianConfig{
		Store: *db, Sessions: sessionCounts, Duration: *duration, Requests: int64(*requests),
		Peer: *peer, OPA: *opaBin, CPUProfile: *cpuProfile, Log: newLogger(stderr),
	}
	if *target != "" {
		if err := bench.CheckLoopback(*target); err != nil {
			return fmt.Errorf("%w: --url: %v", errUsage, err)
		}
		c.URL = strings.TrimRight(*target, "/")
		dir := *keys
		if dir == "" {
			dir = filepath.Join(storeopen.DefaultDir, "keys")
		}
		if c.Key, err = acsagent.HMACKey(dir); err != nil {
			return err
		}
	}
	return bench.RunGuardian(ctx, c, stdout, stderr)
}

// runBenchSoak is `acsledger bench soak` (bench.RunSoak): the bench
// guardian load paced for a long time, sampled and plotted.
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
	case *sessions < 1 || *sessions > bench.MaxSessions:
		return fmt.Errorf("%w: --sessions %d: must be 1 to %d", errUsage, *sessions, bench.MaxSessions)
	case *duration <= 0 || *duration > bench.MaxSoakDuration:
		return fmt.Errorf("%w: --duration %v: must be positive and at most %v", errUsage, *duration, bench.MaxSoakDuration)
	case *rate < 0 || *rate > bench.MaxSoakRate || math.IsNaN(*rate):
		return fmt.Errorf("%w: --rate %v: must be 0 (measure) to %d", errUsage, *rate, bench.MaxSoakRate)
	case *interval < time.Second || *interval > *duration/2:
		return fmt.Errorf("%w: --interval %v: must be at least 1s and at most half of --duration", errUsage, *interval)
	case *rate == 0 && (*probe < time.Second || *probe > bench.MaxDuration):
		return fmt.Errorf("%w: --probe %v: must be 1s to %v", errUsage, *probe, bench.MaxDuration)
	case *sessionLen < 1:
		return fmt.Errorf("%w: --session-length %d: must be positive", errUsage, *sessionLen)
	}
	// Interrupting a long soak still summarizes and plots what it sampled.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.RunSoak(ctx, bench.SoakConfig{
		Store: *db, Rate: *rate, Probe: *probe, Sessions: *sessions, SessionLen: *sessionLen,
		Duration: *duration, Interval: *interval, Out: *out, MemProfile: *memProfile, Log: newLogger(stderr),
	}, stdout, stderr)
}
