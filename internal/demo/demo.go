// Package demo is the workload of `acsledger demo`: a short, realistic
// multi-session agent workload (a coding agent with an Intent, a reviewer
// subagent, an ASK its approver may grant, a support agent calling tools
// through MCP) sent to a running server over HTTP by internal/acsagent's
// agent, whose stored chains it then fetches and verifies (package verify)
// against the chain heads the signed responses published.
package demo

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
	"path/filepath"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/verify"
)

var arg = acsagent.Arg

// Config is one demo run.
type Config struct {
	// Base is the server's base URL.
	Base string
	// Key is the server's HMAC key the agents sign with; Keys and KeysDir
	// are the server's key set and directory, to verify the responses
	// and to print how to do the same.
	Key     *sig.PrivateKey
	Keys    *sig.KeySet
	KeysDir string
	// Approvers are the private keys of approvers who may grant an ASK.
	Approvers []*sig.PrivateKey
	// Token reads the chains back; TokenFrom is a shell expression
	// yielding it, for the printed hints (the token is never printed).
	Token, TokenFrom string
	Client           *http.Client
	// Out is where the demo tells what happens; Dir where each session's
	// signed responses are written.
	Out io.Writer
	Dir string
}

// Run sends the workload, prints every decision, and verifies each
// session's stored chain. A chain that does not verify is an error after
// every session was checked.
func Run(ctx context.Context, c Config) error {
	d := &demo{token: c.Token, tokenFrom: c.TokenFrom, base: c.Base, key: c.Key, approvers: c.Approvers, client: c.Client, w: c.Out, dir: c.Dir}
	if err := d.run(ctx); err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return fmt.Errorf("%w (is 'acsledger serve' running at %s?)", err, d.base)
		}
		return err
	}
	return d.verify(ctx, c.Keys, c.KeysDir)
}

// ServeKeysDir is where serve keeps its keys when demo is given none:
// ./acsledger-data/keys, else ./acsledger-keys (a PostgreSQL store's)
// when only that exists.
func ServeKeysDir() string {
	dir := filepath.Join(storeopen.DefaultDir, "keys")
	if _, err := os.Stat(dir); err != nil {
		if pg := keydir.Default("postgres://"); fileExists(pg) {
			return pg
		}
	}
	return dir
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Token finds a token to read the chains back with: $ACSLEDGER_TOKEN,
// $ACSLEDGER_ADMIN_TOKEN, or the file serve saved its first admin token
// in: admin-token beside the key directory given with --keys (serve
// --db DIR keeps DIR/keys and DIR/admin-token), else serve's default
// file. It returns the token and, for the printed hints, a shell expression
// that yields it (never the token itself).
func Token(file, keysDir string) (string, string, error) {
	if file == "" {
		for _, env := range []string{"ACSLEDGER_TOKEN", "ACSLEDGER_ADMIN_TOKEN"} {
			if v := os.Getenv(env); v != "" {
				return v, "$" + env, nil
			}
		}
		file = keydir.AdminTokenFile("")
		if beside := filepath.Join(filepath.Dir(keysDir), "admin-token"); keysDir != "" {
			if _, err := os.Stat(beside); err == nil {
				file = beside
			}
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("couldn't read a token to fetch the chains with: %w (set ACSLEDGER_TOKEN or pass --token-file)", err)
	}
	return strings.TrimSpace(string(b)), "$(cat " + file + ")", nil
}

// demo holds one run's sessions and what they were answered.
type demo struct {
	token     string // reads the chains back; never printed
	tokenFrom string // where the token came from, for the hints
	base      string
	key       *sig.PrivateKey
	approvers []*sig.PrivateKey
	client    *http.Client
	w         io.Writer
	dir       string
	sessions  []*demoSession
}

// demoSession is a session of the demo and its signed responses, as sent.
type demoSession struct {
	*acsagent.Session
	label     string
	responses [][]byte
	head      string
}

func (d *demo) session(ctx context.Context, label, agentID string, start map[string]any) (*demoSession, error) {
	s, err := acsagent.New(d.base, agentID, d.key, d.client)
	if err != nil {
		return nil, err
	}
	ds := &demoSession{Session: s, label: label}
	d.sessions = append(d.sessions, ds)
	fmt.Fprintf(d.w, "\nsession %s  agent %s  (%s)\n", s.ID, agentID, label)
	_, raw, err := s.Send(ctx, guardian.MethodHello, acsagent.HelloBody())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	d.printHello(raw)
	if _, err := d.step(ctx, ds, "steps/sessionStart", "start", map[string]any{"payload": start}); err != nil {
		return nil, err
	}
	return ds, nil
}

func (d *demo) printHello(raw []byte) {
	var r struct {
		Result struct {
			Version string   `json:"negotiated_version"`
			Methods []string `json:"methods_evaluated"`
		} `json:"result"`
	}
	_ = json.Unmarshal(raw, &r)
	fmt.Fprintf(d.w, "  %-26s %-52s ACS %s, evaluating %s\n", guardian.MethodHello, "", r.Result.Version, strings.Join(r.Result.Methods, " "))
}

// step sends one chained request and prints what was decided.
func (d *demo) step(ctx context.Context, s *demoSession, method, what string, body map[string]any) (*acsagent.Result, error) {
	r, raw, err := s.Send(ctx, method, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.label, err)
	}
	line := raw
	if c := new(bytes.Buffer); json.Compact(c, raw) == nil {
		line = c.Bytes()
	}
	s.responses = append(s.responses, line)
	s.head = r.ChainHash
	codes := strings.Join(r.ReasonCodes, ",")
	if codes == "" {
		codes = "-"
	}
	if r := []rune(what); len(r) > 52 {
		what = string(r[:49]) + "..."
	}
	fmt.Fprintf(d.w, "  %-26s %-52s %-6s %-44s chain %.12s\n", method, what, strings.ToUpper(r.Decision), codes, r.ChainHash)
	return r, nil
}

func (d *demo) toolCall(ctx context.Context, s *demoSession, tool, capability string, args map[string]any, what string) (*acsagent.Result, error) {
	body := acsagent.ToolCall(tool, args)
	if capability != "" {
		body["payload"].(map[string]any)["capability"] = capability
	}
	return d.step(ctx, s, "steps/toolCallRequest", tool+": "+what, body)
}

// mcpCall sends a wrapped MCP tools/call (protocols/MCP/tools/call): the MCP
// request's members sit in params beside the ACS ones.
func (d *demo) mcpCall(ctx context.Context, s *demoSession, tool string, args map[string]any, what string) (*acsagent.Result, error) {
	return d.step(ctx, s, "protocols/MCP/tools/call", "mcp "+tool+": "+what, map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params":  map[string]any{"name": tool, "arguments": args},
		"payload": map[string]any{"name": tool, "arguments": args},
	})
}

func (d *demo) run(ctx context.Context) error {
	fmt.Fprintf(d.w, "acsledger demo: sending a small agent workload to %s/acs\n", d.base)

	// A coding agent fixing a test, with an Intent the user stated.
	coder, err := d.session(ctx, "coding agent", "demo-coder", map[string]any{"intent": map[string]any{
		"raw":               "fix the failing parser test",
		"parsed":            []string{"filesystem.read", "filesystem.write", "process.execute"},
		"parser_provenance": map[string]any{"provenance_id": "p-intent", "origin": "user_input"},
		"scope_mode":        "strict",
	}})
	if err != nil {
		return err
	}
	// call is one tool call of the coder with its Intent's capability.
	call := func(tool, capability, what string, args map[string]any) func() error {
		return func() error {
			_, err := d.toolCall(ctx, coder, tool, capability, args, what)
			return err
		}
	}
	steps := []func() error{
		func() error {
			_, err := d.step(ctx, coder, "steps/userMessage", "user: fix the failing parser test", map[string]any{"payload": map[string]any{
				"content": []any{map[string]any{"type": "text", "value": "The parser test fails on Windows line endings, please fix it.", "provenance": map[string]any{"provenance_id": "p-user-1", "origin": "user_input"}}},
			}})
			return err
		},
		call("read_file", "filesystem.read", "internal/parser/lexer.go", map[string]any{"path": arg("internal/parser/lexer.go", "p-a1", "agent_generated")}),
		call("bash", "process.execute", "go test ./internal/parser/ -run TestCRLF", map[string]any{"command": arg("go test ./internal/parser/ -run TestCRLF", "p-a2", "agent_generated")}),
		call("bash", "process.execute", "rm -rf / --no-preserve-root", map[string]any{"command": arg("rm -rf / --no-preserve-root", "p-a3", "agent_generated")}),
		call("bash", "process.execute", "git clone https://ghp_…@github.com/acme/parser", map[string]any{"command": arg("git clone https://ghp_0123456789abcdefghijABCDEFGHIJklmnopqr@github.com/acme/parser", "p-a4", "user_input")}),
		func() error {
			_, err := d.step(ctx, coder, "steps/memoryStore", "remember: lexer must accept CRLF", map[string]any{"payload": map[string]any{
				"content": map[string]any{"value": "The lexer must accept CRLF line endings (parser test TestCRLF).", "provenance": map[string]any{"provenance_id": "p-mem-1", "origin": "agent_generated"}},
			}})
			return err
		},
		func() error { return d.subagent(ctx, coder) },
		func() error { return d.askAndGrant(ctx, coder) },
		func() error {
			_, err := d.step(ctx, coder, "steps/sessionEnd", "end", map[string]any{"payload": map[string]any{}})
			return err
		},
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}

	// A support agent calling tools through MCP.
	support, err := d.session(ctx, "support agent over MCP", "demo-support", map[string]any{})
	if err != nil {
		return err
	}
	if _, err := d.mcpCall(ctx, support, "get_weather", map[string]any{"city": "Oslo"}, `{"city":"Oslo"}`); err != nil {
		return err
	}
	if _, err := d.mcpCall(ctx, support, "get_weather", map[string]any{"city": "Oslo", "api_token": "ghp_0123456789abcdefghijABCDEFGHIJklmnopqr"}, `{"city":"Oslo","api_token":"ghp_…"}`); err != nil {
		return err
	}
	if _, err := d.step(ctx, support, "steps/sessionEnd", "end", map[string]any{"payload": map[string]any{}}); err != nil {
		return err
	}
	return nil
}

// subagent starts a reviewer subagent in its own session and stops it.
func (d *demo) subagent(ctx context.Context, parent *demoSession) error {
	child, err := acsagent.New(d.base, "demo-coder/reviewer", d.key, d.client)
	if err != nil {
		return err
	}
	if _, err := d.step(ctx, parent, "steps/subagentStart", "reviewer subagent "+child.ID[:8], map[string]any{"payload": map[string]any{"subagent_session_id": child.ID}}); err != nil {
		return err
	}
	sub := &demoSession{Session: child, label: "reviewer subagent"}
	d.sessions = append(d.sessions, sub)
	fmt.Fprintf(d.w, "    subagent session %s  agent %s\n", child.ID, child.AgentID)
	if _, _, err := child.Send(ctx, guardian.MethodHello, acsagent.HelloBody()); err != nil {
		return fmt.Errorf("reviewer subagent: %w", err)
	}
	for _, st := range []struct {
		method, what string
		body         map[string]any
	}{
		{"steps/sessionStart", "start", map[string]any{"payload": map[string]any{}}},
		{"steps/toolCallRequest", "grep: CRLF in internal/parser", acsagent.ToolCall("grep", map[string]any{"pattern": arg(`\r\n`, "p-r1", "agent_generated"), "path": arg("internal/parser", "p-r2", "agent_generated")})},
		{"steps/sessionEnd", "end", map[string]any{"payload": map[string]any{}}},
	} {
		fmt.Fprint(d.w, "  ")
		if _, err := d.step(ctx, sub, st.method, st.what, st.body); err != nil {
			return err
		}
	}
	_, err = d.step(ctx, parent, "steps/subagentStop", "reviewer subagent "+child.ID[:8]+" completed", map[string]any{"payload": map[string]any{"subagent_session_id": child.ID, "outcome": "completed"}})
	return err
}

// askAndGrant asks to publish code, a capability outside the session's
// Intent: the baseline policy asks its approver (security-oncall). With the
// approver's key the demo grants the ASK through POST /acs/approvals for
// this request and retries; a server that cannot route ASK answers DENY.
func (d *demo) askAndGrant(ctx context.Context, s *demoSession) error {
	push := func() (*acsagent.Result, error) {
		return d.toolCall(ctx, s, "git_push", "code.publish", map[string]any{"branch": arg("fix/crlf-lexer", "p-a5", "agent_generated")}, "fix/crlf-lexer (outside the Intent)")
	}
	r, err := push()
	if err != nil || r.Decision != string(guardian.Ask) {
		if err == nil {
			fmt.Fprintf(d.w, "    (no ASK: %s)\n", r.Reasoning)
		}
		return err
	}
	a := r.AskDetails
	if a == nil {
		return fmt.Errorf("ASK without ask_details")
	}
	fmt.Fprintf(d.w, "    ASK to %s %s: %s\n", a.Approver.Type, a.Approver.ID, a.Prompt)
	var key *sig.PrivateKey
	for _, k := range d.approvers {
		if k.KeyID() == a.Approver.ID {
			key = k
		}
	}
	if key == nil {
		fmt.Fprintf(d.w, "    (no key for approver %s: pass --approver-keys DIR to grant it)\n", a.Approver.ID)
		return nil
	}
	signer, err := key.Signer("")
	if err != nil {
		return err
	}
	doc, err := guardian.SignApproval(guardian.Approval{
		SessionID: s.ID, AskStepID: r.RequestID, Approver: a.Approver, Decision: guardian.Allow,
		IntentExtension: &guardian.ApprovalExtension{Capabilities: a.RequestedCapabilities, Scope: "this_request"},
		Timestamp:       time.Now().UTC().Format(time.RFC3339),
	}, signer)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+"/acs/approvals", bytes.NewReader(doc))
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Decision  string `json:"decision"`
		ChainHash string `json:"chain_hash"`
		Error     string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&res)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /acs/approvals: HTTP %d: %s", resp.StatusCode, res.Error)
	}
	s.head = res.ChainHash
	fmt.Fprintf(d.w, "  %-26s %-52s %-6s %-44s chain %.12s\n", "POST /acs/approvals", a.Approver.ID+" grants "+strings.Join(a.RequestedCapabilities, ","), strings.ToUpper(res.Decision), "-", res.ChainHash)
	_, err = push()
	return err
}

// verify fetches every session's chain, checks it and the chain heads the
// signed responses published (package verify), and says how to do the same.
func (d *demo) verify(ctx context.Context, keys *sig.KeySet, keysDir string) error {
	fmt.Fprintf(d.w, "\nevidence (signed responses in %s):\n", d.dir)
	var failed error
	for _, s := range d.sessions {
		respFile := filepath.Join(d.dir, s.ID+".responses.jsonl")
		if err := os.WriteFile(respFile, append(bytes.Join(s.responses, []byte("\n")), '\n'), 0o644); err != nil {
			return err
		}
		entries, err := d.chain(ctx, s.ID)
		if err != nil {
			return err
		}
		rep, err := verify.VerifyChainHeads(bytes.NewReader(entries), bytes.NewReader(bytes.Join(s.responses, []byte("\n"))), keys, s.ID)
		switch {
		case err != nil:
			failed = errors.Join(failed, fmt.Errorf("session %s: %w", s.ID, err))
			fmt.Fprintf(d.w, "  %s  %-24s could not be verified: %v\n", s.ID, s.label, err)
		case !rep.Verified():
			failed = errors.Join(failed, fmt.Errorf("session %s: %d findings, first: %v", s.ID, len(rep.Findings), rep.Findings[0]))
			fmt.Fprintf(d.w, "  %s  %-24s DOES NOT VERIFY: %v\n", s.ID, s.label, rep.Findings[0])
		default:
			fmt.Fprintf(d.w, "  %s  %-24s %2d entries verified, head %.12s matches %d signed responses\n", s.ID, s.label, rep.Entries, rep.Head, len(s.responses))
		}
	}
	first := d.sessions[0].ID
	fmt.Fprintf(d.w, "\nlook at the evidence yourself:\n")
	fmt.Fprintf(d.w, "  TOKEN=%s\n", d.tokenFrom)
	fmt.Fprintf(d.w, "  curl -s -H \"Authorization: Bearer $TOKEN\" %s/api/v1/sessions?agent_id=demo-coder\n", d.base)
	fmt.Fprintf(d.w, "  curl -s -H \"Authorization: Bearer $TOKEN\" '%s/api/v1/sessions/%s/entries?format=jsonl' > chain.jsonl\n", d.base, first)
	fmt.Fprintf(d.w, "  go run ./cmd/acsverify chain --session %s --responses %s --keys %s chain.jsonl\n", first, filepath.Join(d.dir, first+".responses.jsonl"), keysDir)
	return failed
}

// chain returns a session's stored entries as JSON Lines.
func (d *demo) chain(ctx context.Context, sessionID string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/api/v1/sessions/"+sessionID+"/entries?format=jsonl", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET the chain of session %s: HTTP %d: %s", sessionID, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}
