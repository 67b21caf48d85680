//go:build drills

package failover_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/verify"
)

// binary is the acsledger command the drill runs, built by TestMain as it
// ships (without -race).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acsledger-failover-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "acsledger")
	if out, err := exec.Command("go", "build", "-o", binary, "github.com/acsledger/acsledger/cmd/acsledger").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "couldn't build acsledger: %v\n%s", err, out)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// adminToken is the bootstrap admin token of the drill's server: the
// verification reads of the evidence API need a credential.
const adminToken = "acsl_failover-drill-bootstrap-admin-token"

// The drill's phases are bounded so that it ends well within three
// minutes on a loaded machine, or fails saying which phase stalled.
const (
	agents        = 8
	warmAcks      = 150 // acknowledged decisions before the pre-failover checkpoint
	outage        = time.Second
	afterAcks     = 150 // acknowledged decisions after the promotion
	phaseDeadline = 40 * time.Second
)

// TestFailover kills the primary under load, promotes the synchronous
// standby, and checks that nothing acknowledged was lost and that the
// Merkle log goes on from its last checkpoint.
func TestFailover(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()

	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "standby1")
	primary.SetSynchronous(t, "standby1")
	db := primary.NewDatabase(t)
	// Both servers, the writable one chosen at every connection; a host
	// that does not answer is given up after connect_timeout seconds.
	multi := strings.Replace(db, primary.Addr(), primary.Addr()+","+standby.Addr(), 1) + "&target_session_attrs=read-write&connect_timeout=5"
	onStandby := strings.Replace(db, primary.Addr(), standby.Addr(), 1)

	keys := filepath.Join(t.TempDir(), "keys")
	run(t, "keygen", "--dir", keys, "--alg", "ECDSA-P256,HMAC-SHA256")
	run(t, "migrate", "--db", db)
	srv := startServe(t, "--db", multi, "--keys", keys)
	kd, err := sig.LoadKeyDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	logPolicy := &verify.CheckpointPolicy{LogKeys: logKeys(t, keys)}

	// Load: agents sessions, each sending tool calls one after the other.
	load := newLoad(srv.url, kd)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range agents {
		a := load.agent(t)
		if err := a.open(ctx); err != nil {
			t.Fatalf("opening a session: %v\n%s", err, srv.log())
		}
		wg.Go(func() { load.drive(loadCtx, a) })
	}
	defer func() { stopLoad(); wg.Wait() }()

	waitFor(t, "acknowledged decisions before the failover", func() bool { return load.acked() >= warmAcks })
	var before checkpoint
	waitFor(t, "a checkpoint before the failover", func() bool {
		before = srv.checkpoint(t, logPolicy)
		return before.Size > 0
	})
	// A commit is visible on the primary a moment before the standby has
	// it; an acknowledgement after the checkpoint was read proves it
	// replicated (WAL is flushed in order).
	seen := load.acked()
	waitFor(t, "an acknowledgement after the checkpoint", func() bool { return load.acked() > seen })

	ackedAtKill := load.acked()
	killedAt := time.Now()
	primary.Kill(t)
	time.Sleep(outage)
	promotedAt := time.Now()
	standby.Promote(t)
	ackedAtPromote := load.acked()
	waitFor(t, "acknowledged decisions after the promotion", func() bool { return load.acked() >= ackedAtPromote+afterAcks })
	stopLoad()
	wg.Wait()
	recovered := load.firstAckAfter(promotedAt).Sub(promotedAt)
	if code := srv.status(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the promotion: %d, want 200\n%s", code, srv.log())
	}

	// Every leaf integrated: the log's newest checkpoint covers every entry
	// of the new primary.
	conn, err := pgx.Connect(ctx, onStandby)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var stored uint64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM entries").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var after checkpoint
	waitFor(t, "the log to integrate every entry", func() bool {
		after = srv.checkpoint(t, logPolicy)
		return after.Size >= stored
	})

	// Zero acknowledged decisions lost: each signed chain_hash is the
	// entry_hash of its step on the new primary.
	acks := load.all()
	found := 0
	for _, a := range acks {
		var h []byte
		err := conn.QueryRow(ctx, "SELECT entry_hash FROM entries WHERE session_id = $1 AND step_id = $2", a.session, a.requestID).Scan(&h)
		switch {
		case err == pgx.ErrNoRows:
			t.Errorf("acknowledged decision lost: session %s step %s (chain_hash %s)", a.session, a.requestID, a.chainHash)
		case err != nil:
			t.Fatal(err)
		case fmt.Sprintf("%x", h) != a.chainHash:
			t.Errorf("session %s step %s: stored entry_hash %x, the signed answer said %s", a.session, a.requestID, h, a.chainHash)
		default:
			found++
		}
	}
	// Steps committed while their answers were in flight (the primary died
	// between its commit and its answer) are in the ledger without an
	// acknowledgement; they are reported, not lost.
	var sessionEntries int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM entries WHERE session_id = ANY($1)", load.sessions()).Scan(&sessionEntries); err != nil {
		t.Fatal(err)
	}
	unacked := sessionEntries - len(acks)

	// Every session's chain, signatures and log inclusion verify on the
	// new primary.
	for _, id := range load.sessions() {
		var rep struct {
			Verified bool              `json:"verified"`
			Entries  int               `json:"entries"`
			Findings []json.RawMessage `json:"findings"`
		}
		srv.getJSON(t, "/api/v1/sessions/"+id+"/verify", &rep)
		if !rep.Verified || rep.Entries == 0 {
			t.Errorf("session %s does not verify after the failover: %d entries, findings %s", id, rep.Entries, rep.Findings)
		}
	}

	// The log goes on from its last checkpoint: the new tree extends the
	// one signed before the failover.
	if after.Size <= before.Size {
		t.Fatalf("no checkpoint after the failover: size %d, before %d", after.Size, before.Size)
	}
	var cons struct {
		Proof []string `json:"proof"`
	}
	srv.getJSON(t, fmt.Sprintf("/api/v1/proofs/consistency?old=%d&new=%d", before.Size, after.Size), &cons)
	proof := make([][]byte, len(cons.Proof))
	for i, p := range cons.Proof {
		if proof[i], err = base64.StdEncoding.DecodeString(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := verify.VerifyConsistency(before.Size, after.Size, proof, before.Root, after.Root); err != nil {
		t.Errorf("checkpoint %d after the failover does not extend checkpoint %d before it: %v", after.Size, before.Size, err)
	}

	took := time.Since(began)
	t.Logf("failover: acknowledged %d, found %d, lost %d", len(acks), found, len(acks)-found)
	t.Logf("failover: %d acknowledged before the kill, %d after the promotion; %d committed without an answer; %d steps answered without a commit during the outage, %d failed",
		ackedAtKill, len(acks)-ackedAtPromote, unacked, load.refused.Load(), load.failed.Load())
	t.Logf("failover: service answering with commits again %v after pg_ctl promote (%v after kill -9)", recovered.Round(time.Millisecond), load.firstAckAfter(promotedAt).Sub(killedAt).Round(time.Millisecond))
	t.Logf("failover: checkpoint %d before, %d after; consistency proof verified; %d sessions verified", before.Size, after.Size, len(load.sessions()))
	t.Logf("failover: drill took %v", took.Round(time.Second))
	if len(acks) != found {
		t.Fatalf("%d acknowledged decisions lost", len(acks)-found)
	}
	if took > 3*time.Minute {
		t.Errorf("the drill took %v, over its 3-minute bound", took)
	}
	srv.stop(t)
}

// waitFor polls cond until it holds, failing the test after phaseDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(phaseDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, phaseDeadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs the binary to completion.
func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("acsledger %s: %v\n%s", args[0], err, out)
	}
	return string(out)
}

// logKeys are the Merkle log's verifier keys, as `acsledger log-key`
// prints them for auditors.
func logKeys(t *testing.T, keys string) []string {
	var vkeys []string
	for _, line := range strings.Split(strings.TrimSpace(run(t, "log-key", "--keys", keys)), "\n") {
		if !strings.HasPrefix(line, "origin: ") {
			vkeys = append(vkeys, line)
		}
	}
	return vkeys
}

// server is a running `acsledger serve`.
type server struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

var servingLine = regexp.MustCompile(`url=(https?://[0-9.:]+)`)

func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "ACSLEDGER_ADMIN_TOKEN="+adminToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case s.url = <-urlc:
	case err := <-s.done:
		t.Fatalf("acsledger serve exited before serving: %v\n%s", err, s.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("acsledger serve did not report its address\n%s", s.log())
	}
	return s
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// stop ends the server with SIGTERM, as an orchestrator does.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("acsledger serve exited with %v\n%s", err, s.log())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("acsledger serve did not stop after SIGTERM\n%s", s.log())
	}
}

func (s *server) status(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (s *server) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// checkpoint is the log's latest checkpoint, its signature verified; the
// zero checkpoint before the first.
type checkpoint = verify.Checkpoint

func (s *server) checkpoint(t *testing.T, policy *verify.CheckpointPolicy) checkpoint {
	t.Helper()
	resp, err := http.Get(s.url + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return checkpoint{}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /checkpoint: %d %s", resp.StatusCode, b)
	}
	cp, findings, err := verify.VerifyCheckpoint(b, policy, "checkpoint")
	if err != nil || len(findings) > 0 {
		t.Fatalf("checkpoint %q: %v %+v", b, err, findings)
	}
	return cp
}

// load is the agents' traffic and what came back.
type load struct {
	acsURL  string
	keys    *sig.KeyDir
	hmac    *sig.PrivateKey
	client  *http.Client
	refused atomic.Int64 // answers without a chain_hash: nothing recorded
	failed  atomic.Int64 // no answer at all, or an unsigned one

	mu       sync.Mutex
	acks     []ack
	ackTimes []time.Time
	ids      []string
}

// ack is a decision that got a signed answer publishing its chain head.
type ack struct {
	session, requestID, chainHash string
}

func newLoad(base string, kd *sig.KeyDir) *load {
	l := &load{acsURL: base + "/acs", keys: kd, client: &http.Client{Timeout: 30 * time.Second}}
	for _, k := range kd.Private {
		if k.Algorithm() == sig.HMACSHA256 {
			l.hmac = k
		}
	}
	return l
}

func (l *load) record(a ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
	l.ackTimes = append(l.ackTimes, time.Now())
}

func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

func (l *load) all() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ack(nil), l.acks...)
}

func (l *load) sessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// firstAckAfter is when the first acknowledgement after t came back.
func (l *load) firstAckAfter(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.ackTimes {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// agent is one HMAC-signed ACS session.
type agent struct {
	l       *load
	session string
	signer  sig.Signer
	id      int
}

func (l *load) agent(t *testing.T) *agent {
	a := &agent{l: l, session: uuid()}
	var err error
	if a.signer, err = l.hmac.Signer(a.session); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.ids = append(l.ids, a.session)
	l.mu.Unlock()
	return a
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

var helloPayload = map[string]any{
	"acs_versions_supported": []string{"0.1.0"},
	"methods_implemented":    []string{"steps/sessionStart", "steps/toolCallRequest", "steps/sessionEnd"},
	"transports_supported":   []string{"http"},
	"provenance_producer":    "deterministic",
	"profiles_supported":     []string{"acs-core", "acs-audit"},
}

// calls are the tool calls the agents make: allowed and denied ones.
var calls = []map[string]any{
	toolCall("read_file", "path", "internal/parser/lexer.go"),
	toolCall("bash", "command", "go test ./... -count=1"),
	toolCall("bash", "command", "rm -rf / --no-preserve-root"),
	toolCall("list_directory", "path", "docs"),
}

func toolCall(tool, arg, value string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": tool}, "arguments": map[string]any{arg: map[string]any{
		"value": value, "provenance": map[string]any{"provenance_id": "p-" + arg, "origin": "agent_generated"}}}}
}

// send posts one signed request and returns its request_id and the raw
// answer.
func (a *agent) send(ctx context.Context, method string, payload any) (string, []byte, error) {
	a.id++
	reqID := uuid()
	env, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.id, "method": method, "params": map[string]any{
		"acs_version": "0.1.0",
		"request_id":  reqID,
		"timestamp":   time.Now().UTC().Format(time.RFC3339Nano),
		"metadata":    map[string]any{"agent_id": "agent-failover", "session_id": a.session},
		"payload":     payload,
	}})
	if err != nil {
		return "", nil, err
	}
	if env, err = sig.SignEnvelope(env, sig.Params, a.signer); err != nil {
		return "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.l.acsURL, bytes.NewReader(env))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.l.client.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	return reqID, raw, err
}

// step sends one request and records it if its answer is signed by the
// Guardian's keys and publishes a chain head: an acknowledged decision.
func (a *agent) step(ctx context.Context, method string, payload any) (decision string, err error) {
	reqID, raw, err := a.send(ctx, method, payload)
	if err != nil {
		return "", err
	}
	var r struct {
		Result *struct {
			Decision  string `json:"decision"`
			ChainHash string `json:"chain_hash"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Result == nil {
		return "", fmt.Errorf("no result: %s", raw)
	}
	if _, err := sig.VerifyEnvelope(raw, a.l.keys.KeySet, a.session); err != nil {
		return "", fmt.Errorf("answer signature: %w", err)
	}
	if r.Result.ChainHash == "" {
		return r.Result.Decision, errNotRecorded
	}
	a.l.record(ack{session: a.session, requestID: reqID, chainHash: r.Result.ChainHash})
	return r.Result.Decision, nil
}

var errNotRecorded = fmt.Errorf("answered without a chain_hash: nothing recorded")

// open sends the handshake and steps/sessionStart.
func (a *agent) open(ctx context.Context) error {
	if _, _, err := a.send(ctx, "handshake/hello", helloPayload); err != nil {
		return err
	}
	d, err := a.step(ctx, "steps/sessionStart", map[string]any{})
	if err == nil && d != "allow" {
		err = fmt.Errorf("steps/sessionStart answered %s", d)
	}
	return err
}

// drive sends tool calls until ctx ends. A step the ledger could not take
// is answered at once (the deny posture); the agent then waits a little,
// as a real one backs off, and goes on with its next step.
func (l *load) drive(ctx context.Context, a *agent) {
	for i := 0; ctx.Err() == nil; i++ {
		_, err := a.step(ctx, "steps/toolCallRequest", calls[i%len(calls)])
		switch {
		case err == nil:
			continue
		case ctx.Err() != nil:
			return
		case err == errNotRecorded:
			l.refused.Add(1)
		default:
			l.failed.Add(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
