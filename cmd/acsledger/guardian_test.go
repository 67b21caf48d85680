package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/pgtest"
)

// acsClient builds HMAC-signed ACS requests for one session.
type acsClient struct {
	session string
	signer  sig.Signer
	id      int
}

func (c *acsClient) request(t *testing.T, method string, payload any) []byte {
	t.Helper()
	c.id++
	env, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": map[string]any{
		"acs_version": "0.1.0",
		"request_id":  acs.NewUUID(),
		"timestamp":   time.Now().UTC().Format(time.RFC3339Nano),
		"metadata":    map[string]any{"agent_id": "agent-cli", "session_id": c.session},
		"payload":     payload,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.signer == nil {
		return env
	}
	out, err := sig.SignEnvelope(env, sig.Params, c.signer)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var helloPayload = map[string]any{
	"acs_versions_supported": []string{"0.1.0"},
	"methods_implemented":    []string{"steps/sessionStart", "steps/toolCallRequest", "steps/sessionEnd", "system/ping"},
	"transports_supported":   []string{"http", "stdio"},
	"provenance_producer":    "deterministic",
	"profiles_supported":     []string{"acs-core", "acs-audit"},
}

type acsReply struct {
	Result map[string]any  `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// postACS posts a request to the Guardian of the server at url and
// decodes the answer.
func postACS(t *testing.T, url string, body []byte) acsReply {
	t.Helper()
	resp, err := http.Post(url+"/acs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return decodeReply(t, b)
}

func decodeReply(t *testing.T, b []byte) acsReply {
	t.Helper()
	var r acsReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply is not JSON: %v: %s", err, b)
	}
	return r
}

// TestServeGuardian drives `acsledger serve` as an agent would: keys made by
// `acsledger keygen`, a signed handshake and steps over HTTP with the
// shipped baseline policy, then the chain through the evidence API.
func TestServeGuardian(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if out := keygen(t, keys, "--alg", "ECDSA-P256,HMAC-SHA256"); !strings.Contains(out, "acsledger-hmac-sha256\tHMAC-SHA256") {
		t.Fatalf("keygen printed %s", out)
	}
	c := hmacClient(t, keys)

	s := startServer(t, "--db", t.TempDir(), "--keys", keys)
	send := func(body []byte) acsReply { return postACS(t, s.url, body) }
	if r := send(c.request(t, "handshake/hello", helloPayload)); r.Error != nil || r.Result == nil {
		t.Fatalf("handshake failed: %+v", r)
	}
	if r := send(c.request(t, "steps/sessionStart", map[string]any{})); r.Result["decision"] != "allow" {
		t.Fatalf("sessionStart: %+v", r)
	}
	r := send(c.request(t, "steps/toolCallRequest", map[string]any{
		"tool": map[string]any{"name": "bash"},
		"arguments": map[string]any{"command": map[string]any{
			"value":      "rm -rf / --no-preserve-root",
			"provenance": map[string]any{"provenance_id": "p-1", "origin": "agent_generated"},
		}},
	}))
	if r.Result["decision"] != "deny" {
		t.Fatalf("the baseline policy let a destructive command through: %+v", r)
	}
	head, _ := r.Result["chain_hash"].(string)

	code, body := get(t, s.url+"/api/v1/sessions/"+c.session+"/entries?format=jsonl")
	if code != 200 {
		t.Fatalf("chain: %d %s", code, body)
	}
	if n, h := replay(t, body); n != 2 || h.String() != head {
		t.Fatalf("stored chain: %d entries to %s, want 2 to the published head %s", n, h, head)
	}
	if !bytes.Contains(body, []byte(`"policy_version"`)) {
		t.Fatalf("decision entries carry no policy reference:\n%s", body)
	}

	// Once the Merkle log has anchored the head, the server's own
	// verification of the session (chain, signed heads, policy references,
	// checkpoint, inclusion) finds nothing.
	var report struct {
		Verified bool              `json:"verified"`
		Entries  int               `json:"entries"`
		Head     string            `json:"head"`
		Findings []json.RawMessage `json:"findings"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body = get(t, s.url+"/api/v1/sessions/"+c.session+"/verify")
		if err := json.Unmarshal(body, &report); code != 200 || err != nil {
			t.Fatalf("verify: %d %s", code, body)
		}
		if report.Verified || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !report.Verified || report.Entries != 2 || report.Head != head || len(report.Findings) != 0 {
		t.Fatalf("online verification of the session: %s", body)
	}
	s.stop(t, syscall.SIGTERM)
}

// TestGuardianStdio runs `acsledger guardian --stdio` and pings it through
// Content-Length framing.
func TestGuardianStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, binary, "guardian", "--stdio", "--db", dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ping := (&acsClient{session: acs.NewUUID()}).request(t, "system/ping", map[string]any{"echo": "hello"})
	fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(ping), ping)
	br := bufio.NewReader(stdout)
	hdr, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		t.Fatalf("reading frame header: %v\nstderr: %s", err, stderr.String())
	}
	n, _ := strconv.Atoi(hdr.Get("Content-Length"))
	frame := make([]byte, n)
	if _, err := io.ReadFull(br, frame); err != nil {
		t.Fatal(err)
	}
	r := decodeReply(t, frame)
	payload, _ := r.Result["payload"].(map[string]any)
	if r.Result["decision"] != "allow" || payload["echo"] != "hello" || payload["status"] == nil {
		t.Fatalf("ping reply: %s", frame)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("guardian --stdio after stdin closed: %v\n%s", err, stderr.String())
	}
	// With no --keys, a first start writes fresh keys beside the store.
	if m, _ := filepath.Glob(filepath.Join(dir, "keys", "*.key.json")); len(m) != 2 {
		t.Fatalf("default key directory holds %v, want an ECDSA-P256 and an HMAC key", m)
	}
}

// TestLedgerOutage stops PostgreSQL under a running `acsledger serve` and
// starts it again. While it is down every step is answered at once with
// the posture the handshake advertised: by default a signed DENY
// (ledger_unavailable, no chain_hash: nothing was recorded), with
// --on-ledger-failure proceed a signed -32603. /readyz answers 503 while
// the store cannot be written and 200 once it can again, /healthz stays
// 200 throughout, and the failing requests cost a few log lines, not one
// per request.
func TestLedgerOutage(t *testing.T) {
	for _, posture := range []string{"deny", "proceed"} {
		t.Run(posture, func(t *testing.T) { testLedgerOutage(t, posture) })
	}
}

func testLedgerOutage(t *testing.T, posture string) {
	ps := pgtest.NewServer(t)
	db := ps.NewDatabase(t)
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys, "--alg", "ECDSA-P256,HMAC-SHA256")
	migrateStore(t, db)
	args := []string{"--db", db, "--keys", keys}
	if posture == "proceed" {
		args = append(args, "--on-ledger-failure", "proceed")
	}
	s := startServer(t, args...)
	c := hmacClient(t, keys)
	send := func(body []byte) acsReply { return postACS(t, s.url, body) }
	status := func(path string) int {
		t.Helper()
		code, _ := get(t, s.url+path)
		return code
	}
	readFile := map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{"path": map[string]any{
		"value": "README.md", "provenance": map[string]any{"provenance_id": "p-1", "origin": "user_input"}}}}

	hello := send(c.request(t, "handshake/hello", helloPayload))
	if hello.Result["on_decision_failure"] != posture {
		t.Fatalf("handshake advertises on_decision_failure %v, want %s: %+v", hello.Result["on_decision_failure"], posture, hello)
	}
	if r := send(c.request(t, "steps/toolCallRequest", readFile)); r.Result["decision"] != "allow" {
		t.Fatalf("step before the outage: %+v", r)
	}
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz before the outage: %d", got)
	}

	ps.Stop(t)
	logBefore := len(s.log())
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the database down: %d, want 503", got)
	}
	if got := status("/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz with the database down: %d, want 200 (liveness)", got)
	}
	const steps = 200
	start := time.Now()
	for i := range steps {
		r := send(c.request(t, "steps/toolCallRequest", readFile))
		switch posture {
		case "deny":
			codes, _ := r.Result["reason_codes"].([]any)
			if r.Result["decision"] != "deny" || len(codes) != 1 || codes[0] != "ledger_unavailable" || r.Result["chain_hash"] != nil {
				t.Fatalf("step %d in the outage, posture deny: %+v", i, r)
			}
		case "proceed":
			var e struct {
				Code int `json:"code"`
				Data struct {
					Reason string `json:"reason"`
				} `json:"data"`
				Signature map[string]any `json:"signature"`
			}
			if err := json.Unmarshal(r.Error, &e); err != nil || e.Code != -32603 || e.Data.Reason != "ledger_unavailable" || e.Signature == nil {
				t.Fatalf("step %d in the outage, posture proceed: %s", i, r.Error)
			}
		}
	}
	took := time.Since(start)
	outage := s.log()[logBefore:]
	if n := strings.Count(outage, "\n"); n > 20 {
		t.Errorf("%d failed steps logged %d lines, want a few (back-off):\n%s", steps, n, outage)
	}
	t.Logf("%d steps answered in %v during the outage; %d log lines", steps, took, strings.Count(outage, "\n"))

	ps.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for status("/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still failing 30s after the database came back\n%s", s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := send(c.request(t, "steps/toolCallRequest", readFile))
	if r.Result["decision"] != "allow" || r.Result["chain_hash"] == nil {
		t.Fatalf("step after the outage: %+v", r)
	}
	code, body := get(t, s.url+"/api/v1/sessions/"+c.session+"/entries?format=jsonl")
	if n, h := replay(t, body); code != 200 || n != 2 || h.String() != r.Result["chain_hash"] {
		t.Fatalf("stored chain after the outage: %d entries to %s (status %d), want the 2 answered steps", n, h, code)
	}
	s.stop(t, syscall.SIGTERM)
}

// hmacClient returns a client signing with the HMAC key of the key
// directory, for a new session.
func hmacClient(t *testing.T, keys string) *acsClient {
	t.Helper()
	kd, err := sig.LoadKeyDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	c := &acsClient{session: acs.NewUUID()}
	for _, k := range kd.Private {
		if k.Algorithm() == sig.HMACSHA256 {
			if c.signer, err = k.Signer(c.session); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatalf("no HMAC key in %s", keys)
	return nil
}
