package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/proccpu"
	"github.com/acsledger/acsledger/ledger"
)

// peerOPAServer is the --peer of `acsledger bench guardian` that a team
// runs instead of a Guardian: OPA's own server (`opa run --server`), with
// the shipped baseline bundle and decision logging on.
const peerOPAServer = "opa-server"

// opaDecisionPath is where OPA's Data API serves the baseline's decision
// rule (policy.DecisionRule, data.acs.decision).
const opaDecisionPath = "/v1/data/acs/decision"

// opaServer is an `opa run --server` child process on a loopback port.
type opaServer struct {
	url  string // base URL, e.g. http://127.0.0.1:8181
	cmd  *exec.Cmd
	dir  string // the bundle directory it loaded
	done chan struct{}
}

// startOPAServer runs bin (OPA's command, built from the OPA module in
// go.mod: go build -o opa github.com/open-policy-agent/opa) as a server on
// 127.0.0.1, loaded with the baseline bundle written out as files, and
// waits until its health endpoint reports the bundle loaded. Decision
// logging is on, to the console sink: every decision is serialized with
// its input and result, as a team reading OPA's decision logs runs it.
// The console goes to /dev/null, so the sink costs OPA its encoding and a
// write, and costs this process nothing.
func startOPAServer(ctx context.Context, bin string) (*opaServer, error) {
	dir, err := os.MkdirTemp("", "acsledger-bench-opa-")
	if err != nil {
		return nil, err
	}
	if err := writeBundleDir(dir, policy.Baseline()); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := loopbackPort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	cmd := exec.Command(bin, "run", "--server", "--addr", addr,
		"--skip-version-check", "--log-level", "error",
		"--set", "decision_logs.console=true",
		filepath.Join(dir, "bundle"))
	// Stdout and Stderr nil: the child writes to /dev/null itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("couldn't start %s (build it with: go build -o opa github.com/open-policy-agent/opa): %w", bin, err)
	}
	s := &opaServer{url: "http://" + addr, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := s.waitHealthy(ctx, 60*time.Second); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// waitHealthy polls /health?bundles until OPA answers 200 or d passes.
func (s *opaServer) waitHealthy(ctx context.Context, d time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("opa run --server exited during startup (%v); run it by hand to see its error", s.cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opa run --server at %s not healthy after %v", s.url, d)
		}
	}
}

// pids is the OPA process, for cpuMeter.
func (s *opaServer) pids() []int { return []int{s.cmd.Process.Pid} }

func (s *opaServer) close() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// writeBundleDir writes b's modules and data.json under dir/bundle, the
// layout `opa run` loads: data.json at the root is the data document's
// root, as the engine mounts it.
func writeBundleDir(dir string, b *policy.Bundle) error {
	root := filepath.Join(dir, "bundle")
	for p, src := range b.Modules {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			return err
		}
	}
	if b.Data != nil {
		if err := os.WriteFile(filepath.Join(root, "data.json"), b.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loopbackPort returns a port free on 127.0.0.1 a moment ago.
func loopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// opaDataRequests are the Data API request bodies, {"input": document},
// of the benchCalls for worker w: each document is the one the Guardian's
// builder gives the engine (bareInputs), so OPA's server evaluates what the
// Guardian's engine does.
func opaDataRequests(key *sig.PrivateKey, w int) ([][]byte, error) {
	ins, err := bareInputs(key, w)
	if err != nil {
		return nil, err
	}
	bodies := make([][]byte, len(ins))
	for i, in := range ins {
		doc, err := in.Document()
		if err != nil {
			return nil, err
		}
		bodies[i] = append(append([]byte(`{"input":`), doc...), '}')
	}
	return bodies, nil
}

// driveOPAServer measures OPA's server: each worker POSTs the benchCalls'
// input documents to the baseline's decision over loopback HTTP, one at a
// time, with the Guardian's load generator, concurrency and checks.
func driveOPAServer(ctx context.Context, base string, key *sig.PrivateKey, workers int, d time.Duration, budget int64, started func()) (*loadResult, error) {
	client := benchClient(workers)
	defer client.CloseIdleConnections()
	decisionURL := base + opaDecisionPath
	return drive(ctx, workers, d, budget, func(ctx context.Context, w int) (stepFunc, error) {
		bodies, err := opaDataRequests(key, w)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, i int) (string, error) {
			k := (w + i) % len(bodies)
			got, err := postDecision(ctx, client, decisionURL, bodies[k])
			if err != nil {
				return "", err
			}
			return got, checkDecision(benchCalls[k].tool, got, benchCalls[k].want)
		}, nil
	}, started)
}

// postDecision posts one Data API request and returns the decision member
// of its result.
func postDecision(ctx context.Context, client *http.Client, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("opa: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("opa: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	var r struct {
		DecisionID string `json:"decision_id"`
		Result     *struct {
			Decision string `json:"decision"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("opa: the answer is not JSON: %v", err)
	}
	if r.Result == nil || r.Result.Decision == "" {
		return "", fmt.Errorf("opa: the answer has no decision: %s", raw)
	}
	// OPA gives a decision an ID only when a decision log records it.
	if r.DecisionID == "" {
		return "", errors.New("opa: the answer has no decision_id: decision logging is off")
	}
	return r.Result.Decision, nil
}

// postgresPIDs returns a function listing the backends of store's
// database, when store is a PostgreSQL store on this machine (the server's
// background processes and other databases' sessions are left out). It
// returns nil for any other store.
func postgresPIDs(ctx context.Context, store ledger.Store) func() []int {
	pg, ok := store.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return nil
	}
	return func() []int {
		rows, err := pg.Pool().Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
		if err != nil {
			return nil
		}
		pids, _ := pgx.CollectRows(rows, pgx.RowTo[int])
		return pids
	}
}

// cpuMeter counts the CPU time that this process and other processes
// (the Postgres server's, or OPA's) spend during a measurement, from
// /proc (Linux; elsewhere it counts nothing). On a shared machine the
// rate swings with other work, while CPU per decision does much less.
type cpuMeter struct {
	other  func() []int // nil: this process only
	self0  time.Duration
	other0 map[int]time.Duration
}

func (m *cpuMeter) start() {
	m.self0 = proccpu.Of(os.Getpid())
	m.other0 = m.snapshot()
}

func (m *cpuMeter) snapshot() map[int]time.Duration {
	cpu := map[int]time.Duration{}
	if m.other != nil {
		for _, pid := range m.other() {
			cpu[pid] = proccpu.Of(pid)
		}
	}
	return cpu
}

// print writes the CPU per decision since start: this process's (the load
// generator's client, and an in-process Guardian), and name's. A process
// that started during the measurement counts from zero; one that ended is
// lost.
func (m *cpuMeter) print(w io.Writer, decisions int, name string) {
	if decisions == 0 {
		return
	}
	self := proccpu.Of(os.Getpid()) - m.self0
	per := func(d time.Duration) string { return ms(d / time.Duration(decisions)) }
	line := "  cpu per decision: this process " + per(self)
	if m.other != nil {
		var other time.Duration
		for pid, c := range m.snapshot() {
			other += c - m.other0[pid]
		}
		line += fmt.Sprintf(", %s %s", name, per(other))
	}
	fmt.Fprintln(w, line)
}
