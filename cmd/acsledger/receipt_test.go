package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/bench"
	"github.com/acsledger/acsledger/verify"
)

var (
	acsverifyOnce sync.Once
	acsverifyBin  string
	acsverifyErr  error
)

// acsverifyBinary builds cmd/acsverify once for the tests that hand a
// receipt to the auditor's tool.
func acsverifyBinary(t *testing.T) string {
	t.Helper()
	acsverifyOnce.Do(func() {
		// Beside the acsledger binary, whose directory TestMain removes.
		acsverifyBin = filepath.Join(filepath.Dir(binary), "acsverify")
		if out, err := exec.Command("go", "build", "-o", acsverifyBin, "../acsverify").CombinedOutput(); err != nil {
			acsverifyErr = errors.New(string(out))
		}
	})
	if acsverifyErr != nil {
		t.Fatalf("couldn't build acsverify: %v", acsverifyErr)
	}
	return acsverifyBin
}

// TestReceiptEndToEnd runs the receipt paths with binaries only: a signed
// agent is denied a step; an auditor downloads its receipt from the API
// and writes it with `acsledger receipt`, the agent fetches its own copy
// with its session's key (and cannot fetch another session's), and
// `acsverify receipt` verifies it offline and prints the decision.
func TestReceiptEndToEnd(t *testing.T) { stores(t, testReceiptEndToEnd) }

func testReceiptEndToEnd(t *testing.T, db string) {
	dir := t.TempDir()
	s := startIn(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
	keys := defaultKeysDir(storeURL(db))
	if !filepath.IsAbs(keys) {
		keys = filepath.Join(dir, keys)
	}
	key, err := acsagent.HMACKey(keys)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	a, err := acsagent.New(s.url, "receipt-agent", key, client)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Open(t.Context(), map[string]any{}); err != nil {
		t.Fatalf("open: %v\n%s", err, s.log())
	}
	call := bench.Calls[3] // rm -rf /: the baseline denies it
	r, _, err := a.Send(t.Context(), "steps/toolCallRequest", acsagent.ToolCall(call.Tool, call.Args))
	if err != nil || r.Decision != string(guardian.Deny) {
		t.Fatalf("decision %+v, %v; want deny", r, err)
	}
	const pos = "1" // sessionStart is 0

	// The auditor's copy, once the log has signed a checkpoint over it
	// (409 with Retry-After until then).
	url := s.url + "/api/v1/sessions/" + a.ID + "/entries/" + pos + "/receipt"
	var fromAPI []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := sendAuthed(t, "GET", url, nil)
		b := new(bytes.Buffer)
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			fromAPI = b.Bytes()
			break
		}
		if resp.StatusCode != 409 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("GET receipt: %d %v %s", resp.StatusCode, resp.Header, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt in 30s:\n%s", s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The COSE form (RFC 9942 receipt in a SCITT transparent statement).
	resp := sendAuthed(t, "GET", url+"?format=cose", nil)
	coseBuf := new(bytes.Buffer)
	coseBuf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !verify.IsCOSE(coseBuf.Bytes()) {
		t.Fatalf("GET receipt?format=cose: %d %v %q", resp.StatusCode, resp.Header, coseBuf.Bytes())
	}
	coseAPI := coseBuf.Bytes()

	// The agent's copy, with the credentials of its session, for its
	// step by step_id: the same receipt.
	_, status, raw, err := a.Post(t.Context(), guardian.MethodReceipt, map[string]any{"payload": map[string]any{"step_id": r.RequestID}})
	if err != nil || status != 200 {
		t.Fatalf("agent's receipt: %d %v %s", status, err, raw)
	}
	var got struct {
		Result struct {
			Payload struct {
				Receipt string `json:"receipt"`
			} `json:"payload"`
			Signature any `json:"signature"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || got.Result.Payload.Receipt != string(fromAPI) || got.Result.Signature == nil {
		t.Fatalf("agent's receipt differs from the auditor's (%v):\n%s\n---\n%s", err, raw, fromAPI)
	}
	// Another session's key gets nothing of this session.
	b, err := acsagent.New(s.url, "receipt-agent", key, client)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Open(t.Context(), map[string]any{}); err != nil {
		t.Fatal(err)
	}
	_, _, raw, _ = b.Post(t.Context(), guardian.MethodReceipt, map[string]any{"payload": map[string]any{"step_id": r.RequestID}})
	if !bytes.Contains(raw, []byte(`"reason":"no_such_step"`)) || bytes.Contains(raw, []byte("tlog-proof")) {
		t.Fatalf("another session asked for this session's step: %s", raw)
	}

	// The log grows past the receipt's checkpoint: the auditor keeps the
	// newer checkpoint with the consistency proof from the public
	// endpoint, or a bundle exported since the receipt's tree size.
	rr, err := verify.ParseReceipt(fromAPI)
	if err != nil {
		t.Fatal(err)
	}
	old, err := verify.ParseCheckpointHead(rr.Checkpoint[:bytes.Index(rr.Checkpoint, []byte("\n\n"))+1])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Send(t.Context(), "steps/toolCallRequest", acsagent.ToolCall(bench.Calls[1].Tool, bench.Calls[1].Args)); err != nil {
		t.Fatal(err)
	}
	var newer []byte
	var newSize uint64
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, cp := get(t, s.url+"/checkpoint")
		if c, err := verify.ParseCheckpointHead(cp[:bytes.Index(cp, []byte("\n\n"))+1]); err == nil && c.Size > old.Size {
			newer, newSize = cp, c.Size
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log did not grow past %d", old.Size)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, proof := get(t, fmt.Sprintf("%s/api/v1/proofs/consistency?old=%d&new=%d", s.url, old.Size, newSize))
	_, since := get(t, fmt.Sprintf("%s/api/v1/sessions/%s/bundle?since_size=%d", s.url, a.ID, old.Size))
	files := map[string][]byte{"newer.checkpoint": newer, "proof.json": proof, "since.json": since, "step.tlog-proof": fromAPI}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.stop(t, syscall.SIGTERM)

	// The operator's CLI writes the same receipt.
	out := filepath.Join(dir, "step.tlog-proof")
	cmd := exec.Command(binary, "receipt", "--db", db, "--keys", keys, "--session", a.ID, "--position", pos, "--out", out)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("acsledger receipt: %v\n%s", err, o)
	}
	if fromCLI, _ := os.ReadFile(out); !bytes.Equal(fromCLI, fromAPI) {
		t.Fatalf("CLI receipt differs from the API's:\n%s\n---\n%s", fromCLI, fromAPI)
	}
	logKey, err := exec.Command(binary, "log-key", "--keys", keys).Output()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.vkey")
	os.WriteFile(keyFile, logKey, 0o600)

	// The auditor's tool verifies it offline and names the decision.
	v := acsverifyBinary(t)
	o, err := exec.Command(v, "receipt", "--log-key", keyFile, "--json", out).Output()
	var rep struct {
		Verified  bool   `json:"verified"`
		SessionID string `json:"session_id"`
		StepID    string `json:"step_id"`
		Decision  string `json:"decision"`
	}
	if err != nil || json.Unmarshal(o, &rep) != nil || !rep.Verified || rep.SessionID != a.ID || rep.StepID != r.RequestID || !strings.EqualFold(rep.Decision, "deny") {
		t.Fatalf("acsverify receipt: %v\n%s", err, o)
	}
	// Old receipts stay useful as the log grows. (The bundle, exported
	// after the checkpoint was read, may carry a still newer one.)
	for _, args := range [][]string{
		{"--checkpoint", filepath.Join(dir, "newer.checkpoint"), "--consistency", filepath.Join(dir, "proof.json")},
		{"--bundle", filepath.Join(dir, "since.json")},
	} {
		o, err := exec.Command(v, append(append([]string{"receipt", "--log-key", keyFile, "--json"}, args...), filepath.Join(dir, "step.tlog-proof"))...).Output()
		var later struct {
			Verified      bool   `json:"verified"`
			NewerTreeSize uint64 `json:"newer_tree_size"`
		}
		if err != nil || json.Unmarshal(o, &later) != nil || !later.Verified || later.NewerTreeSize < newSize {
			t.Fatalf("acsverify receipt %v: %v\n%s", args, err, o)
		}
	}
	// The COSE form: the CLI writes the API's bytes, acsverify tells the
	// form by itself and verifies the same step; one changed byte in its
	// signature is a finding (exit 1), a changed tag an input error (2).
	coseOut := filepath.Join(dir, "step.cose")
	cmd = exec.Command(binary, "receipt", "--db", db, "--keys", keys, "--session", a.ID, "--position", pos, "--format", "cose", "--out", coseOut)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("acsledger receipt --format cose: %v\n%s", err, o)
	}
	if fromCLI, _ := os.ReadFile(coseOut); !bytes.Equal(fromCLI, coseAPI) {
		t.Fatalf("CLI COSE receipt differs from the API's:\n%x\n---\n%x", fromCLI, coseAPI)
	}
	o, err = exec.Command(v, "receipt", "--log-key", keyFile, "--json", coseOut).Output()
	rep.Verified = false
	if err != nil || json.Unmarshal(o, &rep) != nil || !rep.Verified || rep.SessionID != a.ID || rep.StepID != r.RequestID || !strings.EqualFold(rep.Decision, "deny") {
		t.Fatalf("acsverify receipt (COSE): %v\n%s", err, o)
	}
	for _, c := range []struct {
		at   int
		code int
	}{{len(coseAPI) - 1, 1}, {0, 2}} {
		bad := bytes.Clone(coseAPI)
		bad[c.at] ^= 1
		os.WriteFile(coseOut, bad, 0o600)
		if code := exitCode(exec.Command(v, "receipt", "--log-key", keyFile, coseOut).Run()); code != c.code {
			t.Errorf("COSE receipt with byte %d changed: exit %d, want %d", c.at, code, c.code)
		}
	}

	// One changed byte: findings, exit 1. Not a receipt: exit 2.
	mangled := bytes.Replace(fromAPI, []byte("index "), []byte("index 1"), 1)
	os.WriteFile(out, mangled, 0o600)
	if code := exitCode(exec.Command(v, "receipt", "--log-key", keyFile, out).Run()); code != 1 {
		t.Errorf("mangled receipt: exit %d, want 1", code)
	}
	os.WriteFile(out, []byte("not a receipt\n"), 0o600)
	if code := exitCode(exec.Command(v, "receipt", "--log-key", keyFile, out).Run()); code != 2 {
		t.Errorf("not a receipt: exit %d, want 2", code)
	}
}
