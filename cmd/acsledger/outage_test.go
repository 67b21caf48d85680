package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/pgtest"
)

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
	if out, err := exec.Command(binary, "migrate", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
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
