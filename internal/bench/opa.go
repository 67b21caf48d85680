package bench

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
	"sync"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian/policy"
)

// opaDecisionPath is where OPA's Data API serves the baseline's decision
// rule (policy.DecisionRule, data.acs.decision).
const opaDecisionPath = "/v1/data/acs/decision"

// opaServer is an `opa run --server` child process on a loopback port.
type opaServer struct {
	URL  string // base URL, e.g. http://127.0.0.1:8181
	cmd  *exec.Cmd
	dir  string // the bundle directory it loaded
	done chan struct{}
}

// StartOPAServer runs bin (OPA's command, built from the OPA module in
// go.mod: go build -o opa github.com/open-policy-agent/opa) as a server on
// 127.0.0.1, loaded with the baseline bundle written out as files, and
// waits until its health endpoint reports the bundle loaded. Decision
// logging is on, to the console sink: every decision is serialized with
// its input and result, as a team reading OPA's decision logs runs it.
// The console goes to /dev/null, so the sink costs OPA its encoding and a
// write, and costs this process nothing.
func StartOPAServer(ctx context.Context, bin string) (*opaServer, error) {
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
	s := &opaServer{URL: "http://" + addr, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := s.waitHealthy(ctx, 60*time.Second); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitHealthy polls /health?bundles until OPA answers 200 or d passes.
func (s *opaServer) waitHealthy(ctx context.Context, d time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
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
			return fmt.Errorf("opa run --server at %s not healthy after %v", s.URL, d)
		}
	}
}

// pids is the OPA process, for cpuMeter.
func (s *opaServer) pids() []int { return []int{s.cmd.Process.Pid} }

// Close stops OPA and removes its bundle.
func (s *opaServer) Close() {
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
// of the calls for worker w: each document is the one the Guardian's
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

// DriveOPAServer measures OPA's server: each worker POSTs the calls'
// input documents to the baseline's decision over loopback HTTP, one at a
// time, with the Guardian's load generator, concurrency and checks.
func DriveOPAServer(ctx context.Context, base string, key *sig.PrivateKey, workers int, d time.Duration, budget int64, started func()) (*Result, error) {
	client := newClient(workers)
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
			return got, checkDecision(Calls[k].Tool, got, Calls[k].Want)
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

var (
	opaBuild    sync.Once
	opaBuilt    string
	opaBuildErr error
)

// BuildOPA builds OPA's command from the OPA module in go.mod (a tool of
// this module: go tool opa) into dir, once per process (later calls
// return the first build, wherever it went), and returns its path.
func BuildOPA(dir string) (string, error) {
	opaBuild.Do(func() {
		opaBuilt = filepath.Join(dir, "opa")
		if out, err := exec.Command("go", "build", "-o", opaBuilt, "github.com/open-policy-agent/opa").CombinedOutput(); err != nil {
			opaBuildErr = fmt.Errorf("go build github.com/open-policy-agent/opa: %v\n%s", err, out)
		}
	})
	return opaBuilt, opaBuildErr
}
