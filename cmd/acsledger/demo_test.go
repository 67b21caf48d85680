package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web"
)

// demoLine is one decided request as the demo printed it.
type demoLine struct {
	session, method, what, decision, codes, chain string
}

var (
	demoSessionLine = regexp.MustCompile(`^( *)(?:subagent )?session ([0-9a-f-]{36})  agent (\S+)`)
	demoStepLine    = regexp.MustCompile(`^( +)(\S+) +(.+?) +(ALLOW|DENY|MODIFY|ASK|DEFER) +(\S+) +chain ([0-9a-f]{12})$`)
)

// parseDemo reads the demo's per-step lines and the session each belongs to
// (a subagent's lines are indented two more spaces).
func parseDemo(t *testing.T, out string) (lines []demoLine, sessions []string) {
	t.Helper()
	var top, sub string
	for _, l := range strings.Split(out, "\n") {
		if m := demoSessionLine.FindStringSubmatch(l); m != nil {
			if m[1] == "" {
				top = m[2]
			} else {
				sub = m[2]
			}
			sessions = append(sessions, m[2])
			continue
		}
		m := demoStepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := top
		if len(m[1]) == 4 {
			s = sub
		}
		lines = append(lines, demoLine{session: s, method: m[2], what: m[3], decision: m[4], codes: m[5], chain: m[6]})
	}
	return lines, sessions
}

// approverKeys writes the key of the baseline's approver, security-oncall,
// into dir/approvers and returns the directory and the key.
func approverKeys(t *testing.T, dir string) (string, *sig.PrivateKey) {
	t.Helper()
	k, err := sig.GenerateKey(sig.ECDSAP256, "security-oncall")
	if err != nil {
		t.Fatal(err)
	}
	approvers := filepath.Join(dir, "approvers")
	if err := sig.WriteKeyDir(approvers, k); err != nil {
		t.Fatal(err)
	}
	return approvers, k
}

// TestDemo runs `acsledger demo` against a real `acsledger serve` binary
// with keys from `acsledger keygen` and an approver key, checks the
// decision on every step, and verifies every stored chain and the heads the
// signed responses published with package verify.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	keygen(t, keys)
	approvers, _ := approverKeys(t, dir)
	s := startServer(t, "--db", filepath.Join(dir, "store"), "--keys", keys, "--approver-keys", approvers)

	respDir := filepath.Join(dir, "responses")
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"demo", "--url", s.url, "--keys", keys, "--approver-keys", approvers, "--out", respDir}, &out, &errs)
	if code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s\nserver:\n%s", code, out.String(), errs.String(), s.log())
	}
	checkDemo(t, out.String(), s.url, keys, respDir)
	s.stop(t, syscall.SIGTERM)
}

// checkDemo checks the demo's output step by step and verifies the chains
// of its sessions on the server at url. It returns the git_push decision.
func checkDemo(t *testing.T, output, url, keys, respDir string) string {
	t.Helper()
	out := bytes.NewBufferString(output)
	lines, sessions := parseDemo(t, out.String())
	if len(sessions) != 3 {
		t.Fatalf("want 3 sessions (coder, its subagent, support), got %v\n%s", sessions, out.String())
	}
	coder, reviewer, support := sessions[0], sessions[1], sessions[2]

	type want struct {
		session, method, whatPrefix, decision, codes string
	}
	wants := []want{
		{coder, "steps/sessionStart", "start", "ALLOW", "-"},
		{coder, "steps/userMessage", "user:", "ALLOW", "-"},
		{coder, "steps/toolCallRequest", "read_file:", "ALLOW", "-"},
		{coder, "steps/toolCallRequest", "bash: go test", "ALLOW", "-"},
		{coder, "steps/toolCallRequest", "bash: rm -rf /", "DENY", "destructive_command,recursive_delete_critical_path"},
		{coder, "steps/toolCallRequest", "bash: git clone", "MODIFY", "secret_detected"},
		{coder, "steps/memoryStore", "remember:", "ALLOW", "-"},
		{coder, "steps/subagentStart", "reviewer subagent " + reviewer[:8], "ALLOW", "-"},
		{reviewer, "steps/sessionStart", "start", "ALLOW", "-"},
		{reviewer, "steps/toolCallRequest", "grep:", "ALLOW", "-"},
		{reviewer, "steps/sessionEnd", "end", "ALLOW", "-"},
		{coder, "steps/subagentStop", "reviewer subagent", "ALLOW", "-"},
	}
	// Publishing code is outside the coder's Intent: the baseline asks
	// security-oncall. A server that routes ASK answers ASK, the demo grants
	// it and the retried push is allowed; one that does not (no
	// Config.ApproverCapable in serve) denies it (ACS §9.2).
	i := slices.IndexFunc(lines, func(l demoLine) bool { return strings.HasPrefix(l.what, "git_push:") })
	if i < 0 {
		t.Fatalf("no git_push step\n%s", out.String())
	}
	push := lines[i].decision
	if push == "ASK" {
		wants = append(wants,
			want{coder, "steps/toolCallRequest", "git_push:", "ASK", "ibac_intent_mismatch"},
			want{coder, "POST", "/acs/approvals", "ALLOW", "-"},
			want{coder, "steps/toolCallRequest", "git_push:", "ALLOW", "-"})
	} else {
		wants = append(wants, want{coder, "steps/toolCallRequest", "git_push:", "DENY", "ibac_intent_mismatch,approver_unavailable"})
	}
	wants = append(wants,
		want{coder, "steps/sessionEnd", "end", "ALLOW", "-"},
		want{support, "steps/sessionStart", "start", "ALLOW", "-"},
		want{support, "protocols/MCP/tools/call", `mcp get_weather: {"city":"Oslo"}`, "ALLOW", "-"},
		want{support, "protocols/MCP/tools/call", `mcp get_weather: {"city":"Oslo","api_token"`, "MODIFY", "secret_detected"},
		want{support, "steps/sessionEnd", "end", "ALLOW", "-"})
	if len(lines) != len(wants) {
		t.Fatalf("%d decided steps, want %d\n%s", len(lines), len(wants), out.String())
	}
	for i, w := range wants {
		l := lines[i]
		if l.session != w.session || l.method != w.method || !strings.HasPrefix(l.what, w.whatPrefix) || l.decision != w.decision || l.codes != w.codes {
			t.Errorf("step %d: got %+v, want %+v", i, l, w)
		}
	}
	if strings.Contains(out.String(), "ghp_0123456789") {
		t.Errorf("the demo printed the secret it sends:\n%s", out.String())
	}

	// Every stored chain replays, ends at the last head the demo printed for
	// its session, and matches the heads of the signed responses.
	kd, err := sig.LoadKeyDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range sessions {
		var last string
		for _, l := range lines {
			if l.session == id {
				last = l.chain
			}
		}
		code, entries := get(t, url+"/api/v1/sessions/"+id+"/entries?format=jsonl")
		if code != 200 {
			t.Fatalf("session %s: GET entries: %d %s", id, code, entries)
		}
		rep, err := verify.VerifyChain(bytes.NewReader(entries))
		if err != nil || !rep.Verified() {
			t.Fatalf("session %s: chain does not verify: %v %+v", id, err, rep)
		}
		if !strings.HasPrefix(rep.Head.String(), last) {
			t.Errorf("session %s: stored head %s, the demo's last printed head %s", id, rep.Head, last)
		}
		responses, err := os.ReadFile(filepath.Join(respDir, id+".responses.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		rep, err = verify.VerifyChainHeads(bytes.NewReader(entries), bytes.NewReader(responses), kd.KeySet, id)
		if err != nil || !rep.Verified() {
			t.Fatalf("session %s: published heads do not verify: %v %+v", id, err, rep)
		}
		if !strings.Contains(out.String(), id) || !regexp.MustCompile(id+`  .* \d+ entries verified, head `+last).MatchString(out.String()) {
			t.Errorf("the demo did not report session %s as verified\n%s", id, out.String())
		}
	}
	for _, hint := range []string{"curl -s -H \"Authorization: Bearer $TOKEN\" '" + url + "/api/v1/sessions/" + coder + "/entries?format=jsonl'", "TOKEN=$ACSLEDGER_ADMIN_TOKEN", "go run ./cmd/acsverify chain --session " + coder} {
		if !strings.Contains(out.String(), hint) {
			t.Errorf("the demo does not say %q\n%s", hint, out.String())
		}
	}
	return push
}

// TestDemoTokenBesideKeys: `acsledger demo --keys DIR/keys`, run from
// elsewhere with no token in its environment, reads the admin token that
// `serve --db DIR` saved beside the keys, DIR/admin-token.
func TestDemoTokenBesideKeys(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	env := envWithout()
	s := startIn(t, t.TempDir(), env, "serve", "--addr", "127.0.0.1:0", "--db", data)
	demo := exec.Command(binary, "demo", "--url", s.url, "--keys", filepath.Join(data, "keys"))
	demo.Dir, demo.Env = t.TempDir(), env
	out, err := demo.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "entries verified") {
		t.Fatalf("demo --keys %s: %v\n%s\nserver:\n%s", filepath.Join(data, "keys"), err, out, s.log())
	}
	if hint := "TOKEN=$(cat " + filepath.Join(data, "admin-token") + ")"; !strings.Contains(string(out), hint) {
		t.Errorf("the demo does not say %q\n%s", hint, out)
	}
	s.stop(t, syscall.SIGTERM)
}

// TestDemoNeedsKeys: without the server's key directory the demo says
// where it looked and what to do, and sends nothing.
func TestDemoNeedsKeys(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nokeys")
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"demo", "--url", "http://127.0.0.1:1", "--keys", missing}, &out, &errs); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errs.String())
	}
	if !strings.Contains(errs.String(), missing) || !strings.Contains(errs.String(), "acsledger serve") || out.Len() != 0 {
		t.Errorf("stderr %q, stdout %q", errs.String(), out.String())
	}
}

// TestDemoAskGrant runs the demo against a Guardian that can route ASK
// (Config.ApproverCapable, approver keys, POST /acs/approvals), served in
// process the way serve mounts it, because serve does not yet set
// ApproverCapable: the git_push ASK is granted by security-oncall for this
// request and the retried push is allowed, and every chain still verifies.
func TestDemoAskGrant(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	keygen(t, keys)
	kd, err := sig.LoadKeyDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	approvers, approverKey := approverKeys(t, dir)
	approverSet, err := sig.NewKeySet(approverKey.Public())
	if err != nil {
		t.Fatal(err)
	}

	storeURL := filepath.Join(dir, "store")
	if err := storeopen.Migrate(ctx, storeURL); err != nil {
		t.Fatal(err)
	}
	store, err := storeopen.Open(ctx, storeURL, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	engine, err := policy.New(ctx, policy.Baseline(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := guardian.Config{
		Store: store, Policy: opapolicy.New(engine), Keys: kd.KeySet,
		ApproverKeys: approverSet, ApproverTypes: []string{"human", "agent", "service"},
		ApproverCapable: func(string) bool { return true },
		Logger:          newLogger(io.Discard),
	}
	if err := cfg.SetSigningKeys(kd.Private, ""); err != nil {
		t.Fatal(err)
	}
	g, err := guardian.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := web.New(store, web.Options{Auth: web.AuthOptions{Bootstrap: testAdminToken}})
	h.Router().Method(http.MethodPost, "/acs", g)
	h.Router().Method(http.MethodPost, "/acs/approvals", g.ApprovalHandler())
	srv := httptest.NewServer(h)
	defer srv.Close()

	respDir := filepath.Join(dir, "responses")
	var out, errs bytes.Buffer
	if code := run(ctx, []string{"demo", "--url", srv.URL, "--keys", keys, "--approver-keys", approvers, "--out", respDir}, &out, &errs); code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	if push := checkDemo(t, out.String(), srv.URL, keys, respDir); push != "ASK" {
		t.Fatalf("git_push was answered %s, want ASK from a Guardian that routes ASK\n%s", push, out.String())
	}
}

// TestDemoNoServer: with keys but no server, the demo says what to start.
func TestDemoNoServer(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	k, err := sig.GenerateKey(sig.HMACSHA256, "acsledger-hmac")
	if err != nil {
		t.Fatal(err)
	}
	if err := sig.WriteKeyDir(keys, k); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // a loopback port nobody listens on
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"demo", "--url", url, "--keys", keys}, &out, &errs); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errs.String())
	}
	if !strings.Contains(errs.String(), "is 'acsledger serve' running at "+url) {
		t.Errorf("stderr %q does not say to start the server", errs.String())
	}
}
