package guardian_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/internal/indepverify"
	"github.com/acsledger/acsledger/ledger"
)

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// walkPolicy denies deleting files and rewrites the recipient of e-mails.
func walkPolicy() *guardian.TestPolicy {
	return &guardian.TestPolicy{
		PolicyID: "walk-policy", PolicyVersion: "2026.03.1",
		Rules: []guardian.TestRule{
			{ID: "no_delete", Method: "steps/toolCallRequest", Tool: "delete_file", Decision: guardian.Decision{
				Disposition: guardian.Deny, Reasoning: "deleting files is outside this agent's intent", ReasonCodes: []string{"ibac_intent_mismatch"},
			}},
			{ID: "mail_internal_only", Method: "steps/toolCallRequest", Tool: "send_email", Decision: guardian.Decision{
				Disposition: guardian.Modify, Reasoning: "external recipients are replaced by the finance list",
				Modifications: &acs.Modifications{ParameterOverrides: map[string]json.RawMessage{"to": json.RawMessage(`{"value":"finance@example.com"}`)}},
			}},
		},
	}
}

func prov(id, origin string) map[string]any {
	return map[string]any{"provenance_id": id, "origin": origin}
}

func text(s, provID, origin string) []map[string]any {
	return []map[string]any{{"type": "text", "value": s, "provenance": prov(provID, origin)}}
}

// walkStep is one request of the realistic session and what must come back.
type walkStep struct {
	method  string
	payload map[string]any
	turn    bool
	want    string
	codes   []string
}

func realisticSession() []walkStep {
	turnID := "turn-1"
	return []walkStep{
		{method: "steps/sessionStart", want: "allow", payload: map[string]any{
			"intent": map[string]any{
				"raw":               "Summarize the Q3 report and mail it to finance",
				"parsed":            []string{"filesystem.read", "email.send"},
				"parser_provenance": prov("p-intent", "user_input"),
				"scope_mode":        "strict",
			}}},
		{method: "steps/agentTrigger", want: "allow", payload: map[string]any{"trigger": "user_request"}},
		{method: "steps/turnStart", turn: true, want: "allow", payload: map[string]any{"turn_id": turnID}},
		{method: "steps/userMessage", turn: true, want: "allow", payload: map[string]any{"content": text("Please summarize q3.pdf and mail it to finance", "p-u1", "user_input")}},
		{method: "steps/memoryContextRetrieval", turn: true, want: "allow", payload: map[string]any{"results": []any{}}},
		{method: "steps/toolCallRequest", turn: true, want: "allow", payload: map[string]any{
			"tool": map[string]any{"name": "read_file"}, "capability": "filesystem.read",
			"arguments": map[string]any{"path": map[string]any{"value": "posix:///data/q3.pdf", "provenance": prov("p-a1", "user_input")}}}},
		{method: "steps/toolCallResult", turn: true, want: "allow", payload: map[string]any{
			"tool": map[string]any{"name": "read_file"}, "exit_status": "success",
			"outputs": []any{map[string]any{"value": "Q3 revenue grew 12%", "provenance": prov("p-o1", "tool_output")}}}},
		{method: "steps/toolCallRequest", turn: true, want: "deny", codes: []string{"ibac_intent_mismatch"}, payload: map[string]any{
			"tool": map[string]any{"name": "delete_file"}, "capability": "filesystem.delete",
			"arguments": map[string]any{"path": map[string]any{"value": "posix:///data/q3.pdf", "provenance": prov("p-a2", "agent_generated")}}}},
		{method: "steps/toolCallRequest", turn: true, want: "modify", payload: map[string]any{
			"tool": map[string]any{"name": "send_email"}, "capability": "email.send",
			"arguments": map[string]any{
				"to":   map[string]any{"value": "someone@elsewhere.example", "provenance": prov("p-a3", "tool_output")},
				"body": map[string]any{"value": "Q3 revenue grew 12%", "provenance": prov("p-a4", "agent_generated")}}}},
		{method: "protocols/MCP/tools/call", turn: true, want: "allow", payload: map[string]any{"name": "search", "arguments": map[string]any{"q": "q3"}}},
		{method: "wrapped:mcp-2025-06-18/tools/call", turn: true, want: "allow", payload: map[string]any{"name": "search", "arguments": map[string]any{"q": "q4"}}},
		{method: "steps/agentResponse", turn: true, want: "allow", payload: map[string]any{"content": text("Sent the summary to finance.", "p-r1", "agent_generated")}},
		{method: "steps/turnEnd", turn: true, want: "allow", payload: map[string]any{"turn_id": turnID, "outcome": "completed"}},
		{method: "agbom/snapshot", want: "allow", payload: map[string]any{"agbom": map[string]any{"components": []any{}}}},
		{method: "steps/sessionEnd", want: "allow", payload: map[string]any{"reason": "completed"}},
	}
}

// responseChecker verifies response signatures independently of acs/sig.
type responseChecker func(t *testing.T, sessionID string, raw []byte)

func hmacChecker(t *testing.T, sessionID string, raw []byte) {
	t.Helper()
	if err := indepverify.VerifyHMAC(raw, "agent-hmac-1", bytes.Repeat([]byte{0x42}, 32), sessionID); err != nil {
		t.Fatalf("independent HMAC check: %v\n%s", err, raw)
	}
}

func asymChecker(k *sig.PrivateKey) responseChecker {
	doc, err := k.Public().MarshalPublic()
	if err != nil {
		panic(err)
	}
	pub, err := indepverify.ParsePublicKey(doc)
	if err != nil {
		panic(err)
	}
	return func(t *testing.T, _ string, raw []byte) {
		t.Helper()
		if err := indepverify.Verify(raw, pub); err != nil {
			t.Fatalf("independent %s check: %v\n%s", k.Algorithm(), err, raw)
		}
	}
}

// TestSessionWalk walks a realistic agent session (handshake, ping,
// sessionStart ... toolCallRequest/Result ... sessionEnd) over real HTTP and
// over stdio, with HMAC and asymmetric response signatures, then checks
// every answer and the stored chain.
func TestSessionWalk(t *testing.T) {
	k := mustKeys(t)
	cases := []struct {
		name     string
		store    string
		agentKey *sig.PrivateKey
		respKey  *sig.PrivateKey
		check    responseChecker
		// heads verifies the published heads: the HMAC IKM, or the
		// response key's public half.
		heads *sig.PublicKey
	}{
		{"hmac", "sqlite", k.hmac, k.ecdsa, hmacChecker, k.hmac.Public()},
		{"ecdsa", "sqlite", k.agent, k.ecdsa, asymChecker(k.ecdsa), k.ecdsa.Public()},
		{"hybrid", "sqlite", k.agent, k.hybrid, asymChecker(k.hybrid), k.hybrid.Public()},
		{"mldsa", "sqlite", k.agent, k.mldsa, asymChecker(k.mldsa), k.mldsa.Public()},
		{"hmac-postgres", "postgres", k.hmac, k.ecdsa, hmacChecker, k.hmac.Public()},
	}
	for _, tc := range cases {
		for _, tr := range []string{"http", "stdio"} {
			t.Run(tc.name+"/"+tr, func(t *testing.T) {
				s := newSetup(t, tc.store, func(c *guardian.Config) {
					c.Policy = walkPolicy()
					c.ResponseKey = tc.respKey
				})
				var tp transport
				if tr == "http" {
					tp = newHTTP(t, s.g)
				} else {
					tp = newStdio(t, s.g)
				}
				a := newAgent(t, tc.agentKey, s.clock.Now)
				walk(t, s, tp, a, tc.check)
				ks, err := sig.NewKeySet(tc.heads)
				if err != nil {
					t.Fatal(err)
				}
				checkPublishedHeads(t, s.store, a.sessionID, ks)
			})
		}
	}
}

func walk(t *testing.T, s *setup, tp transport, a *agent, check responseChecker) {
	ctx := context.Background()
	hello := decode(t, tp.send(t, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)))
	mustResult(t, hello)
	check(t, a.sessionID, hello.raw)
	if hello.str("negotiated_version") != "0.1.0" || hello.str("selected_transport") != tp.name() {
		t.Fatalf("ServerHello: %s", hello.raw)
	}
	if got := hello.Result["skew_window_ms"]; got != float64(300000) {
		t.Errorf("skew_window_ms = %v, want 300000", got)
	}
	if got := hello.Result["on_decision_failure"]; got != "deny" {
		t.Errorf("on_decision_failure = %v, want deny (the default)", got)
	}
	algs := asSlice(hello.Result["signature_algorithms_supported"])
	if !slices.Contains(algs, any("HMAC-SHA256")) || !slices.Contains(algs, any("ECDSA-P256")) {
		t.Errorf("signature_algorithms_supported = %v", algs)
	}
	if got := asSlice(hello.Result["methods_evaluated"]); len(got) != 24 {
		t.Errorf("methods_evaluated has %d methods, want the 24 the client declared: %v", len(got), got)
	}

	// Liveness: unsigned, answered, never chained.
	unsigned := &agent{sessionID: a.sessionID, agentID: a.agentID, now: a.now}
	ping := decode(t, tp.send(t, unsigned.envelope(t, guardian.MethodPing, map[string]any{"echo": "are you there"}, nil)))
	mustResult(t, ping)
	check(t, a.sessionID, ping.raw)
	if pl, _ := ping.Result["payload"].(map[string]any); ping.decision() != "allow" || pl["status"] != "ok" || pl["echo"] != "are you there" || pl["server_timestamp"] == "" {
		t.Fatalf("ping answer: %s", ping.raw)
	}
	if _, ok := ping.Result["chain_hash"]; ok {
		t.Errorf("ping answer carries a chain_hash: %s", ping.raw)
	}

	head := ""
	type sent struct {
		method, requestID string
		params            json.RawMessage
	}
	var log []sent
	for i, st := range realisticSession() {
		var params json.RawMessage
		body := a.envelope(t, st.method, st.payload, func(p map[string]any) {
			md := p["metadata"].(map[string]any)
			if st.turn {
				md["turn_id"] = "turn-1"
			}
			if head != "" {
				md["session_state"] = map[string]any{"chain_hash": head}
			}
		})
		var env struct {
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(body, &env)
		params = env.Params
		var p struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(params, &p)
		r := decode(t, tp.send(t, body))
		mustResult(t, r)
		check(t, a.sessionID, r.raw)
		if r.decision() != st.want {
			t.Fatalf("step %d %s: decision %q, want %q: %s", i, st.method, r.decision(), st.want, r.raw)
		}
		for _, c := range st.codes {
			if !slices.Contains(r.reasonCodes(), c) {
				t.Errorf("step %d: reason_codes %v lack %q", i, r.reasonCodes(), c)
			}
		}
		if r.str("request_id") != p.RequestID || string(r.ID) != strconvI(a.n) {
			t.Errorf("step %d: answer correlates to id %s request_id %s, want %d %s", i, r.ID, r.str("request_id"), a.n, p.RequestID)
		}
		ch := r.str("chain_hash")
		if !hexHash.MatchString(ch) || ch == head {
			t.Fatalf("step %d: chain_hash %q after %q", i, ch, head)
		}
		if refs := asSlice(r.Result["policy_references"]); len(refs) == 0 {
			t.Errorf("step %d: no policy_references: %s", i, r.raw)
		}
		// The answer that left is byte for byte the one the ledger stored.
		stored, err := s.store.Response(ctx, a.sessionID, int64(i))
		if err != nil || !bytes.Equal(stored, r.raw) {
			t.Fatalf("step %d: stored response differs (err %v):\nstored %s\nsent   %s", i, err, stored, r.raw)
		}
		head = ch
		log = append(log, sent{st.method, p.RequestID, params})
	}

	entries := verifyStoredChain(t, s.store, a.sessionID, head)
	cached := 0
	defer func() {
		if cached == 0 {
			t.Error("no entry records a policy cache: the check above never ran")
		}
	}()
	if len(entries) != len(log) {
		t.Fatalf("%d entries stored, %d steps sent (ping must not be chained)", len(entries), len(log))
	}
	for i, e := range entries {
		var c struct {
			StepID      string `json:"step_id"`
			StepType    string `json:"step_type"`
			RequestHash string `json:"request_hash"`
			Timestamp   string `json:"timestamp"`
			Decision    struct {
				Disposition      string           `json:"disposition"`
				ReasonCodes      []string         `json:"reason_codes"`
				PolicyReferences []map[string]any `json:"policy_references"`
				Cache            json.RawMessage  `json:"nd_builtin_cache"`
			} `json:"decision"`
		}
		if err := json.Unmarshal(e.Content, &c); err != nil {
			t.Fatal(err)
		}
		want, _ := acs.RequestHash(log[i].params)
		if c.StepID != log[i].requestID || c.StepType != log[i].method || c.RequestHash != want.String() || c.Timestamp == "" {
			t.Errorf("entry %d = %s; want step_id %s step_type %s request_hash %s", i, e.Content, log[i].requestID, log[i].method, want)
		}
		if len(c.Decision.PolicyReferences) == 0 || c.Decision.PolicyReferences[0]["policy_version"] != "2026.03.1" {
			t.Errorf("entry %d: decision lacks the policy version: %s", i, e.Content)
		}
		// The policy's cache is recorded as a string holding its bytes,
		// which the canonical form of the entry cannot alter. (TestPolicy's
		// default allow records none.)
		if len(c.Decision.Cache) > 0 {
			var cache string
			if err := json.Unmarshal(c.Decision.Cache, &cache); err != nil || !strings.HasPrefix(cache, `{"test_policy_rule":`) {
				t.Errorf("entry %d: nd_builtin_cache %s is not the policy's cache as a JSON string", i, c.Decision.Cache)
			}
			cached++
		}
		// The params are stored beside the entry byte for byte.
		if b, err := s.store.Request(ctx, a.sessionID, e.Position); err != nil || !bytes.Equal(b, log[i].params) {
			t.Errorf("entry %d: stored params %s (err %v), sent %s", i, b, err, log[i].params)
		}
	}
	sess, err := s.store.Session(ctx, a.sessionID)
	if err != nil || sess.Head.String() != head || sess.AgentID != a.agentID {
		t.Fatalf("stored session %+v (err %v), want head %s agent %s", sess, err, head, a.agentID)
	}
	var _ ledger.Store = s.store
}

func strconvI(n int) string { b, _ := json.Marshal(n); return string(b) }
