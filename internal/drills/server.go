//go:build drills

package drills

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/launch"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/verify"
)

// AdminToken is the bootstrap admin token ($ACSLEDGER_ADMIN_TOKEN) of
// every server a drill starts; the admin routes (re-verification) take it.
const AdminToken = "acsl_drill-bootstrap-admin-token"

// Build compiles `acsledger` into dir and returns its path. Drills run the
// binary an operator runs, so a kill is a kill of the real process.
func Build(dir string) (string, error) {
	return build(dir, "acsledger")
}

// build compiles the command ./cmd/name of this module into dir.
func build(dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/acsledger/acsledger/cmd/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("couldn't build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// Main is the TestMain of a package of drills: it builds acsledger into
// a temporary directory, sets *bin to its path, runs the tests with
// pgtest's PostgreSQL (pgtest.Run) and exits with their status.
func Main(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "acsledger-drills-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// Run runs the binary with args to completion and returns its output,
// failing t if it exits non-zero.
func Run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("acsledger %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Keygen writes a key directory with an ECDSA-P256 response key and an
// HMAC-SHA256 key for the agents. Every restart of a drill's server uses
// the same directory: the Merkle log refuses a checkpoint signed by
// another key.
func Keygen(t testing.TB, bin string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	Run(t, bin, "keygen", "--dir", dir, "--alg", "ECDSA-P256,HMAC-SHA256")
	return dir
}

// Server is a running `acsledger serve`.
type Server struct {
	*launch.Process
}

// Serve starts `acsledger serve` on a free loopback port with args and
// returns once it logged the address it serves at. The process is killed
// when t ends if it still runs.
func Serve(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--reverify-every", "0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "ACSLEDGER_ADMIN_TOKEN="+AdminToken)
	return &Server{launch.Start(t, cmd)}
}

// Stop sends SIGTERM and waits for a clean exit.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.Process.Stop(t, syscall.SIGTERM)
}

var client = &http.Client{Timeout: 30 * time.Second}

// Do sends one request to the server with the admin token and returns the
// status and body.
func (s *Server) Do(t testing.TB, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// Ready reports whether /readyz answers 200.
func (s *Server) Ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// LogSize returns the size of the Merkle log's latest checkpoint (0 before
// the first), read with the verifier's checkpoint reader; Checkpoint also
// checks its signatures against the log's keys.
func (s *Server) LogSize(t testing.TB) int64 {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, "/checkpoint", nil)
	if code == http.StatusNotFound {
		return 0
	}
	if code != http.StatusOK {
		t.Fatalf("/checkpoint: %d %s", code, body)
	}
	cp, err := verify.ParseCheckpointHead(body)
	if err != nil {
		t.Fatalf("/checkpoint: %v\n%s", err, body)
	}
	return int64(cp.Size)
}

// LogPolicy returns the policy a checkpoint of the Merkle log signed with
// the keys of keyDir must meet: the verifier keys `acsledger log-key`
// prints for auditors.
func LogPolicy(t testing.TB, bin, keyDir string) *verify.CheckpointPolicy {
	t.Helper()
	var vkeys []string
	for _, line := range strings.Split(strings.TrimSpace(Run(t, bin, "log-key", "--keys", keyDir)), "\n") {
		if !strings.HasPrefix(line, "origin: ") {
			vkeys = append(vkeys, line)
		}
	}
	return &verify.CheckpointPolicy{LogKeys: vkeys}
}

// Checkpoint returns the Merkle log's latest checkpoint, its signature
// verified against policy (the zero checkpoint before the first), and
// fails t if it does not verify.
func (s *Server) Checkpoint(t testing.TB, policy *verify.CheckpointPolicy) verify.Checkpoint {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, "/checkpoint", nil)
	if code == http.StatusNotFound {
		return verify.Checkpoint{}
	}
	if code != http.StatusOK {
		t.Fatalf("/checkpoint: %d %s", code, body)
	}
	cp, findings, err := verify.VerifyCheckpoint(body, policy, "checkpoint")
	if err != nil || len(findings) > 0 {
		t.Fatalf("checkpoint %q: %v %+v", body, err, findings)
	}
	return cp
}

// VerifyConsistency fetches the consistency proof between two of the
// log's checkpoints and checks it: nil when newer's tree extends older's.
func (s *Server) VerifyConsistency(t testing.TB, older, newer verify.Checkpoint) error {
	t.Helper()
	var cons struct {
		Proof [][]byte `json:"proof"`
	}
	s.GetJSON(t, fmt.Sprintf("/api/v1/proofs/consistency?old=%d&new=%d", older.Size, newer.Size), &cons)
	return verify.VerifyConsistency(older.Size, newer.Size, cons.Proof, older.Root, newer.Root)
}

// GetJSON reads path with the admin token into v and fails t unless the
// answer is 200 with a JSON body.
func (s *Server) GetJSON(t testing.TB, path string, v any) {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, path, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// WaitAnchored waits until the Merkle log's checkpoint covers at least
// min entries and has stopped growing for a second: after a restart the
// integrator takes in what was appended but not integrated before the
// kill. Beside the drill's own entries the ledger holds the access log's
// records of the drill's reads, so the log ends above min; the whole-
// ledger re-verification that follows shows it covers every stored entry
// (a stored entry past the checkpoint is not_anchored, a logged one not
// stored is logged_not_stored). It returns the log's size and how long
// after the call it last grew, and fails t after a minute.
func (s *Server) WaitAnchored(t testing.TB, min int64) (size int64, took time.Duration) {
	t.Helper()
	start := time.Now()
	last, since := int64(-1), time.Now()
	for {
		n := s.LogSize(t)
		if n != last {
			last, since = n, time.Now()
		}
		switch {
		case n >= min && time.Since(since) >= time.Second:
			return n, time.Since(start) - time.Second
		case time.Since(start) > time.Minute:
			t.Fatalf("the log holds %d entries (at least %d wanted) a minute after the restart\n%s", n, min, s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitReady waits up to d for /readyz to answer 200 and returns how long
// it took.
func (s *Server) WaitReady(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !s.Ready() {
		if time.Since(start) > d {
			t.Fatalf("/readyz not ready %v after the fault ended\n%s", d, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// WaitFor polls cond every poll and fails t if it is still false after d;
// what names the awaited state in the failure.
func WaitFor(t testing.TB, d, poll time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, d)
		}
		time.Sleep(poll)
	}
}
