package guardian_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
)

func intentPayload(parsed ...string) map[string]any {
	return map[string]any{"intent": map[string]any{
		"raw": "pay the invoice", "parsed": parsed,
		"parser_provenance": prov("p-int", "user_input"), "scope_mode": "strict",
	}}
}

func parsedOf(in *guardian.Intent) []string {
	if in == nil {
		return nil
	}
	return in.Parsed
}

// TestIntentImmutable: Intent is fixed by sessionStart; a later attempt to
// change it is ignored and recorded as an audit event (ACS §8.4).
func TestIntentImmutable(t *testing.T) {
	pol := &recordingPolicy{}
	e := newErrEnv(t, func(c *guardian.Config) { c.Policy = pol }, true)
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", intentPayload("invoice.read"), nil))))
	if got := parsedOf(pol.last().Intent); !slices.Equal(got, []string{"invoice.read"}) {
		t.Fatalf("sessionStart: policy saw intent %v", got)
	}
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/agentTrigger", intentPayload("invoice.read", "payments.send"), nil)))
	mustResult(t, r)
	mustIgnoreIntent(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("pay"), nil))))
	if got := parsedOf(pol.last().Intent); !slices.Equal(got, []string{"invoice.read"}) {
		t.Fatalf("after an ignored change the policy saw intent %v", got)
	}

	t.Run("parsed needs user_input parser_provenance", func(t *testing.T) {
		e := newErrEnv(t, nil, true)
		bad := intentPayload("x")
		bad["intent"].(map[string]any)["parser_provenance"] = prov("p", "tool_output")
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", bad, nil))), -32602, "invalid_params", "must be user_input")
		delete(bad["intent"].(map[string]any), "parser_provenance")
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", bad, nil))), -32602, "invalid_params", "parser_provenance is required")
	})
}

// mustIgnoreIntent checks a session whose chain ends at head and whose
// second entry is a step that tried to set the Intent again: the entry
// holds no intent and records the attempt as the audit event
// intent_modification_ignored (ACS §8.4).
func mustIgnoreIntent(t *testing.T, st ledger.Store, sessionID, head string) {
	t.Helper()
	entries := verifyStoredChain(t, st, sessionID, head)
	var c struct {
		AuditEvents []string `json:"audit_events"`
		Intent      any      `json:"intent"`
	}
	_ = json.Unmarshal(entries[1].Content, &c)
	if !slices.Equal(c.AuditEvents, []string{"intent_modification_ignored"}) || c.Intent != nil {
		t.Fatalf("an Intent set again: entry %s", entries[1].Content)
	}
}

// TestIntentExtension: an approver's grant with scope session extends
// Intent.parsed and is recorded as an intent_extension entry (ACS §9.1);
// forged, misattributed and out-of-scope grants are refused.
func TestIntentExtension(t *testing.T) {
	alice, err := sig.GenerateKey(sig.ECDSAP256, "alice")
	if err != nil {
		t.Fatal(err)
	}
	mallory, _ := sig.GenerateKey(sig.ECDSAP256, "mallory")
	approverKeys, _ := sig.NewKeySet(alice.Public(), mallory.Public())
	pol := &recordingPolicy{TestPolicy: guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1", Rules: []guardian.TestRule{{
		ID: "payments_need_approval", Tool: "pay",
		Decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "payments are outside the intent", Ask: &acs.AskDetails{
			Approver:              acs.Approver{Type: "human", ID: "alice"},
			RequestedCapabilities: []string{"payments.send"},
		}},
	}}}}
	e := newErrEnv(t, func(c *guardian.Config) {
		c.Policy = pol
		c.ApproverTypes = []string{"human"}
		c.ApproverCapable = func(string) bool { return true }
		c.ApproverKeys = approverKeys
	}, true)
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", intentPayload("invoice.read"), nil))))
	askBody := e.a.envelope(t, "steps/toolCallRequest", toolCall("pay"), nil)
	ask := decode(t, e.tp.send(t, askBody))
	if ask.decision() != "ask" {
		t.Fatalf("want ASK: %s", ask.raw)
	}
	askID := ask.str("request_id")

	approval := func(signer *sig.PrivateKey, edit func(a *guardian.Approval)) []byte {
		a := guardian.Approval{
			SessionID: e.a.sessionID, AskStepID: askID, Approver: acs.Approver{Type: "human", ID: "alice"},
			Decision: guardian.Allow, Timestamp: t0.Format("2006-01-02T15:04:05Z"),
			IntentExtension: &guardian.ApprovalExtension{Capabilities: []string{"payments.send"}, Scope: "session"},
		}
		if edit != nil {
			edit(&a)
		}
		s, _ := signer.Signer("")
		b, err := guardian.SignApproval(a, s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	refusals := []struct {
		name string
		doc  []byte
		want error
	}{
		{"signed by another key", approval(mallory, nil), guardian.ErrApprovalForged},
		{"another approver", approval(mallory, func(a *guardian.Approval) { a.Approver.ID = "mallory" }), guardian.ErrApproverMismatch},
		{"approver answers ASK", approval(alice, func(a *guardian.Approval) { a.Decision = guardian.Ask }), guardian.ErrApprovalInvalid},
		{"capability not requested under strict", approval(alice, func(a *guardian.Approval) {
			a.IntentExtension.Capabilities = []string{"payments.send", "filesystem.delete"}
		}), guardian.ErrExtensionRefused},
		{"unknown ASK", approval(alice, func(a *guardian.Approval) { a.AskStepID = "00000000-0000-4000-8000-000000000000" }), guardian.ErrNoPendingAsk},
	}
	for _, r := range refusals {
		if _, err := e.s.g.ResolveAsk(t.Context(), r.doc); !errors.Is(err, r.want) {
			t.Errorf("%s: ResolveAsk = %v, want %v", r.name, err, r.want)
		}
	}
	// Tampering with a signed approval breaks it.
	good := approval(alice, nil)
	tampered := []byte(string(good))
	i := slices.Index(tampered, '"')
	tampered[i+1] ^= 1
	if _, err := e.s.g.ResolveAsk(t.Context(), tampered); err == nil {
		t.Errorf("tampered approval accepted")
	}

	// The approver submits over HTTP.
	approvals := httptest.NewServer(e.s.g.ApprovalHandler())
	defer approvals.Close()
	submit := func(doc []byte) (int, map[string]string) {
		resp, err := http.Post(approvals.URL, "application/json", bytes.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := submit(approval(mallory, nil)); code != http.StatusUnauthorized || !strings.Contains(m["error"], "approval signature") {
		t.Errorf("forged approval over HTTP: %d %v", code, m)
	}
	code, m := submit(good)
	res := guardian.Resolution{Decision: guardian.Disposition(m["decision"]), ChainHash: m["chain_hash"]}
	if code != http.StatusOK || res.Decision != guardian.Allow || !hexHash.MatchString(res.ChainHash) {
		t.Fatalf("approval over HTTP: %d %v", code, m)
	}
	if code, _ := submit(good); code != http.StatusNotFound {
		t.Errorf("a second use of the approval: status %d, want 404", code)
	}
	if _, err := e.s.g.ResolveAsk(t.Context(), good); !errors.Is(err, guardian.ErrNoPendingAsk) {
		t.Errorf("a second use of the approval: %v, want ErrNoPendingAsk", err)
	}
	entries := verifyStoredChain(t, e.s.store, e.a.sessionID, res.ChainHash)
	last := entries[len(entries)-1]
	var ext struct {
		StepType     string   `json:"step_type"`
		AskStepID    string   `json:"ask_step_id"`
		Capabilities []string `json:"capabilities"`
		Approver     struct{ Type, ID string }
		Provenance   struct {
			GrantedBy struct{ ID string } `json:"granted_by"`
		} `json:"extension_provenance"`
	}
	_ = json.Unmarshal(last.Content, &ext)
	if last.StepType != "intent_extension" || ext.AskStepID != askID || !slices.Equal(ext.Capabilities, []string{"payments.send"}) || ext.Provenance.GrantedBy.ID != "alice" {
		t.Fatalf("intent_extension entry: %s", last.Content)
	}

	// The next step's policy input carries the extended intent, with the
	// extension's provenance apart from the parser's.
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), withHead(res.ChainHash))))
	if r.decision() != "allow" {
		t.Fatalf("after the grant: %s", r.raw)
	}
	in := pol.last().Intent
	if got := parsedOf(in); !slices.Equal(got, []string{"invoice.read", "payments.send"}) || len(in.Extensions) != 1 || in.Extensions[0].Approver.ID != "alice" || in.Extensions[0].AskStepID != askID {
		t.Fatalf("policy saw intent %+v", in)
	}

	// Scope this_request: the grant applies to the in-flight request it
	// answers only (§9.1), the paused pay call the agent sends again, not
	// to whatever step comes next; its entry records it; Intent.parsed
	// does not grow.
	ask2 := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("pay"), nil)))
	askID = ask2.str("request_id")
	once := approval(alice, func(a *guardian.Approval) { a.IntentExtension.Scope = "this_request" })
	if _, err := e.s.g.ResolveAsk(t.Context(), once); err != nil {
		t.Fatalf("this_request grant: %v", err)
	}
	decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)))
	if got := pol.last().Grants; len(got) != 0 {
		t.Fatalf("a read_file call saw the this_request grant made for the pay call: %v", got)
	}
	r = decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("pay"), nil)))
	if got := pol.last().Grants; !slices.Equal(got, []string{"payments.send"}) || len(pol.last().Intent.Extensions) != 1 {
		t.Fatalf("the pay call a this_request grant answered saw grants %v, intent %+v", got, pol.last().Intent)
	}
	entries = verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
	var g struct {
		Grants []string `json:"this_request_grants"`
	}
	_ = json.Unmarshal(entries[len(entries)-1].Content, &g)
	if !slices.Equal(g.Grants, []string{"payments.send"}) {
		t.Errorf("entry %s lacks this_request_grants", entries[len(entries)-1].Content)
	}
	decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("pay"), nil)))
	if got := pol.last().Grants; len(got) != 0 {
		t.Fatalf("a this_request grant outlived its request: %v", got)
	}
}

// TestProvenanceForPolicy: the policy sees the provenance objects of the
// session's earlier steps (ACS §7, §12.1) in the step's lineage (from its
// arguments' derived_from and the Intent's parser_provenance), each once,
// not the earlier objects nothing of the step derives from, and not its
// own step's (those are in its params).
func TestProvenanceForPolicy(t *testing.T) {
	pol := &recordingPolicy{}
	e := newErrEnv(t, func(c *guardian.Config) { c.Policy = pol }, true)
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", intentPayload("invoice.read"), nil))))
	if n := len(pol.last().Provenance); n != 0 {
		t.Fatalf("first step: policy saw %d provenance objects", n)
	}
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/userMessage", map[string]any{"content": text("pay it", "p-u1", "user_input")}, nil))))
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/userMessage", map[string]any{"content": text("again", "p-u1", "user_input")}, nil))))
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/userMessage", map[string]any{"content": text("unrelated", "p-u2", "user_input")}, nil))))
	pay := toolCall("pay")
	pay["arguments"] = map[string]any{"amount": map[string]any{"value": "10", "provenance": map[string]any{
		"provenance_id": "p-amount", "origin": "agent_generated", "derived_from": []string{"p-u1"},
	}}}
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", pay, nil))))
	var ids []string
	for _, p := range pol.last().Provenance {
		var v struct {
			ID     string `json:"provenance_id"`
			Origin string `json:"origin"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID+":"+v.Origin)
	}
	if want := []string{"p-int:user_input", "p-u1:user_input"}; !slices.Equal(ids, want) {
		t.Fatalf("policy saw provenance %v, want %v", ids, want)
	}
}
