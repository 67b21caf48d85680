package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/internal/launch"
	"github.com/acsledger/acsledger/internal/pgtest"
)

var binary string

// testAdminToken is the bootstrap admin token ($ACSLEDGER_ADMIN_TOKEN)
// every server the tests start accepts, and that get and post send. The
// tests of the first start clear it.
const testAdminToken = "acsl_test-bootstrap-admin-token"

func TestMain(m *testing.M) {
	os.Setenv("ACSLEDGER_ADMIN_TOKEN", testAdminToken)
	dir, err := os.MkdirTemp("", "acsledger-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "acsledger")
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "couldn't build acsledger: %v\n%s", err, out)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// keygen runs `acsledger keygen --dir keys` with args and returns what it
// printed.
func keygen(t *testing.T, keys string, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"keygen", "--dir", keys}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	return string(out)
}

// migrateStore runs `acsledger migrate` on db and fails the test if it fails.
func migrateStore(t *testing.T, db string) {
	t.Helper()
	if out, err := exec.Command(binary, "migrate", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
}

// server is a running `acsledger serve` process.
type server struct {
	p   *launch.Process
	url string
}

// startServer runs the binary with serve on a free loopback port and waits
// for it to report its address.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startProcess(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
}

// startProcess runs the binary with args and waits for it to log the URL
// it serves at.
func startProcess(t *testing.T, args ...string) *server {
	t.Helper()
	// Defaults such as ./acsledger-keys land in a temporary directory, not
	// in the source tree.
	return startIn(t, t.TempDir(), nil, args...)
}

// startIn is startProcess in directory dir, with env as the environment
// (nil: the test's).
func startIn(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = env
	p := launch.Start(t, cmd)
	return &server{p: p, url: p.URL}
}

func (s *server) log() string { return s.p.Log() }

// stop sends sig and waits for a clean exit.
func (s *server) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	s.p.Stop(t, sig)
}

// authed returns req carrying the test admin token.
func authed(req *http.Request) *http.Request {
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	return req
}

// sendAuthed sends a request with the test admin token; the caller
// closes the answer's body.
func sendAuthed(t *testing.T, method, url string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(authed(req))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp := sendAuthed(t, http.MethodPost, url, strings.NewReader(body))
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: undecodable response: %v", url, err)
	}
	return resp.StatusCode, out
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp := sendAuthed(t, http.MethodGet, url, nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func entryJSON(i int) string {
	return fmt.Sprintf(`{"entry_id":"e-%d","step_id":"req-%d","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:%02dZ","decision":"allow","tool":{"name":"bash","args":{"cmd":"ls -la /tmp"}}}`, i, i, i%60)
}

// replay recomputes a JSONL chain with package acs and returns its head.
func replay(t *testing.T, jsonl []byte) (n int, head acs.Hash) {
	t.Helper()
	var prev *acs.Hash
	for i, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		e, err := acs.ParseEntry(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if (prev == nil) != (e.PreviousHash == nil) || prev != nil && *prev != *e.PreviousHash {
			t.Fatalf("line %d: previous_hash %v, want %v", i+1, e.PreviousHash, prev)
		}
		h := acs.EntryHash(e.Content, prev)
		if e.EntryHash == nil || *e.EntryHash != h {
			t.Fatalf("line %d: entry_hash %v, recomputed %s", i+1, e.EntryHash, h)
		}
		prev, n, head = &h, i+1, h
	}
	return n, head
}

// stores runs f once per store: the embedded default and PostgreSQL,
// migrated by its owner and served as the writer login.
func stores(t *testing.T, f func(t *testing.T, db string)) {
	t.Run("embedded", func(t *testing.T) { f(t, t.TempDir()) })
	t.Run("postgres", func(t *testing.T) { f(t, writerLogin(t)) })
}

// storeKinds runs f as a subtest per store kind, "sqlite" and "postgres",
// as evidencetest.New takes them.
func storeKinds(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
	}
}

func TestServe(t *testing.T) { stores(t, testServe) }

func testServe(t *testing.T, db string) {
	s := startServer(t, "--db", db, "--max-entry-bytes", "4096")

	code, body := get(t, s.url+"/healthz")
	if code != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("healthz: %d %s", code, body)
	}

	var heads []string
	for i := range 3 {
		code, out := post(t, s.url+"/api/v1/sessions/s1/entries?agent_id=agent-7", entryJSON(i))
		if code != http.StatusCreated {
			t.Fatalf("append %d: %d %v", i, code, out)
		}
		if out["position"] != float64(i) {
			t.Fatalf("append %d: position %v", i, out["position"])
		}
		heads = append(heads, out["entry_hash"].(string))
	}
	// A retry of the same entry is idempotent and answers with the original.
	code, out := post(t, s.url+"/api/v1/sessions/s1/entries", entryJSON(1))
	if code != http.StatusOK || out["replayed"] != true || out["entry_hash"] != heads[1] {
		t.Fatalf("retry: %d %v", code, out)
	}

	bad := []struct {
		name, body, want string
		code             int
	}{
		{"malformed", `{"entry_id":`, "", http.StatusBadRequest},
		{"not an object", `["a"]`, "object", http.StatusBadRequest},
		{"wrong type", `{"entry_id":7,"step_id":"x","step_type":"y"}`, "entry_id", http.StatusBadRequest},
		{"oversized", `{"entry_id":"big","step_id":"big","step_type":"steps/memoryWrite","blob":"` + strings.Repeat("x", 5000) + `"}`, "", http.StatusRequestEntityTooLarge},
		{"conflict", strings.Replace(entryJSON(1), "ls -la", "rm -rf", 1), "req-1", http.StatusConflict},
		{"wrong previous_hash", `{"entry_id":"e9","step_id":"req-9","step_type":"steps/toolCallRequest","previous_hash":"` + heads[0] + `"}`, heads[2], http.StatusConflict},
	}
	for _, tc := range bad {
		code, out := post(t, s.url+"/api/v1/sessions/s1/entries", tc.body)
		msg, _ := out["error"].(string)
		if code != tc.code || msg == "" || !strings.Contains(msg+fmt.Sprint(out), tc.want) {
			t.Errorf("%s: got %d %v, want %d mentioning %q", tc.name, code, out, tc.code, tc.want)
		}
	}

	code, body = get(t, s.url+"/api/v1/sessions/s1")
	var sess struct {
		AgentID string `json:"agent_id"`
		Length  int    `json:"length"`
		Head    string `json:"chain_hash"`
	}
	if err := json.Unmarshal(body, &sess); err != nil || code != 200 {
		t.Fatalf("session: %d %s", code, body)
	}
	if sess.Length != 3 || sess.Head != heads[2] || sess.AgentID != "agent-7" {
		t.Fatalf("session after bad input: %+v, want length 3 head %s agent-7", sess, heads[2])
	}

	code, body = get(t, s.url+"/api/v1/sessions/s1/entries?format=jsonl")
	if code != 200 {
		t.Fatalf("chain: %d %s", code, body)
	}
	if n, head := replay(t, body); n != 3 || head.String() != heads[2] {
		t.Fatalf("replayed %d entries to head %s, want 3 to %s", n, head, heads[2])
	}

	// Session ids are opaque strings: "/" and "=" travel escaped in the path.
	if code, out := post(t, s.url+"/api/v1/sessions/tenant%2Fs%3D1/entries", entryJSON(0)); code != http.StatusCreated || out["session_id"] != "tenant/s=1" {
		t.Fatalf("append to an escaped session id: %d %v", code, out)
	}
	if code, body := get(t, s.url+"/api/v1/sessions/tenant%2Fs%3D1"); code != 200 || !strings.Contains(string(body), `"session_id":"tenant/s=1"`) {
		t.Fatalf("session with an escaped id: %d %s", code, body)
	}

	code, body = get(t, s.url+"/api/v1/sessions?agent_id=agent-7")
	if code != 200 || !strings.Contains(string(body), `"session_id":"s1"`) {
		t.Fatalf("sessions by agent: %d %s", code, body)
	}
	code, body = get(t, s.url+"/api/v1/sessions?agent_id=nobody")
	if code != 200 || strings.Contains(string(body), `"s1"`) {
		t.Fatalf("sessions of another agent: %d %s", code, body)
	}
	code, body = get(t, s.url+"/api/v1/sessions?since=yesterday")
	if code != 400 || !strings.Contains(string(body), "since") {
		t.Fatalf("bad since: %d %s", code, body)
	}
	s.stop(t, syscall.SIGINT)
}

// TestServeShutdownKeepsAcknowledged appends from several clients while the
// server gets SIGTERM, then restarts it and checks that every append it
// acknowledged is in the store.
func TestServeShutdownKeepsAcknowledged(t *testing.T) { stores(t, testShutdownKeepsAcknowledged) }

func testShutdownKeepsAcknowledged(t *testing.T, dir string) {
	// The restart must find the same keys: the log refuses to continue
	// from a checkpoint it cannot verify.
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys)
	s := startServer(t, "--db", dir, "--keys", keys)

	type ack struct {
		session, hash string
		position      float64
	}
	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("w%d", w)
			for i := 0; i < 2000; i++ {
				req, err := http.NewRequest(http.MethodPost, s.url+"/api/v1/sessions/"+session+"/entries", strings.NewReader(entryJSON(i)))
				if err != nil {
					return
				}
				resp, err := client.Do(authed(req))
				if err != nil {
					return // the server has gone away
				}
				var out map[string]any
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated {
					return
				}
				mu.Lock()
				acks = append(acks, ack{session, out["entry_hash"].(string), out["position"].(float64)})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	s.stop(t, syscall.SIGTERM)
	wg.Wait()
	if len(acks) == 0 {
		t.Fatal("no append was acknowledged before the signal")
	}

	s = startServer(t, "--db", dir, "--keys", keys)
	for _, a := range acks {
		code, body := get(t, fmt.Sprintf("%s/api/v1/sessions/%s/entries?from=%d&limit=1", s.url, a.session, int(a.position)))
		if code != 200 || !strings.Contains(string(body), a.hash) {
			t.Fatalf("acknowledged %s position %v (%s) missing after restart: %d %s", a.session, a.position, a.hash, code, body)
		}
	}
	t.Logf("%d acknowledged appends all present after SIGTERM and restart", len(acks))
	s.stop(t, syscall.SIGTERM)
}

// TestServeKeysDir: a --keys directory that exists but holds no key files
// (a fresh container volume) gets fresh keys and the server answers signed
// steps with them; a --keys directory that does not exist is an error,
// not a new key set.
func TestServeKeysDir(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--db", filepath.Join(dir, "data"), "--keys", keys)
	for _, f := range []string{"acsledger-hmac.key.json", "acsledger-ecdsa-p256.key.json", "acsledger-ecdsa-p256.pub.json", logKeyFile} {
		if _, err := os.Stat(filepath.Join(keys, f)); err != nil {
			t.Errorf("serve did not write %s: %v\n%s", f, err, s.log())
		}
	}
	s.stop(t, os.Interrupt)
	// Started again, it keeps the keys it wrote.
	before, err := os.ReadFile(filepath.Join(keys, "acsledger-hmac.key.json"))
	if err != nil {
		t.Fatal(err)
	}
	s = startServer(t, "--db", filepath.Join(dir, "data"), "--keys", keys)
	s.stop(t, os.Interrupt)
	if after, _ := os.ReadFile(filepath.Join(keys, "acsledger-hmac.key.json")); !bytes.Equal(before, after) {
		t.Error("a second start replaced the keys")
	}

	out, err := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "data2"), "--keys", filepath.Join(dir, "no-such-dir")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no-such-dir") {
		t.Errorf("serve with a missing --keys directory: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "no-such-dir")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("serve created the missing --keys directory: %v", err)
	}
}
