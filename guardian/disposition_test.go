package guardian_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian"
)

// recordingPolicy wraps a TestPolicy and keeps every Input it saw.
type recordingPolicy struct {
	guardian.TestPolicy
	mu     sync.Mutex
	inputs []guardian.Input
}

func (p *recordingPolicy) Decide(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	p.mu.Lock()
	p.inputs = append(p.inputs, in)
	p.mu.Unlock()
	return p.TestPolicy.Decide(ctx, in)
}

func (p *recordingPolicy) last() guardian.Input {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inputs[len(p.inputs)-1]
}

func str(s string) *string { return &s }

// TestDispositions sends one toolCallRequest per row to a policy returning
// the row's decision, and checks what the Guardian sent (ACS §6, §6.3, §9.2).
func TestDispositions(t *testing.T) {
	approver := acs.Approver{Type: "human", ID: "alice", Endpoint: "https://approvals.example/alice"}
	rows := []struct {
		name     string
		decision guardian.Decision
		edit     func(*guardian.Config)
		want     string
		codes    []string
		reason   string // substring of reasoning
		check    func(t *testing.T, r reply)
	}{
		{name: "allow", decision: guardian.Decision{Disposition: guardian.Allow, Reasoning: "fine"}, want: "allow"},
		{name: "deny gets a reasoning", decision: guardian.Decision{Disposition: guardian.Deny}, want: "deny", reason: "denied by policy"},
		{name: "modify with disjoint redaction and override", want: "modify",
			decision: guardian.Decision{Disposition: guardian.Modify, Reasoning: "redact the body, fix the recipient", Modifications: &acs.Modifications{
				Redactions:         []acs.Redaction{{Path: "/payload/arguments/body/value"}},
				ParameterOverrides: map[string]json.RawMessage{"to": json.RawMessage(`{"value":"finance@example.com"}`)},
			}},
			check: func(t *testing.T, r reply) {
				m, _ := r.Result["modifications"].(map[string]any)
				if len(asSlice(m["redactions"])) != 1 || m["parameter_overrides"] == nil {
					t.Errorf("modifications = %v", m)
				}
			}},
		{name: "modify with modified_content alone", want: "modify",
			decision: guardian.Decision{Disposition: guardian.Modify, Reasoning: "rewritten", Modifications: &acs.Modifications{ModifiedContent: str("echo safe")}}},
		{name: "modify with overlapping targets is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: "overlapping",
			decision: guardian.Decision{Disposition: guardian.Modify, Reasoning: "x", Modifications: &acs.Modifications{
				Redactions:         []acs.Redaction{{Path: "/payload/arguments/to/value"}},
				ParameterOverrides: map[string]json.RawMessage{"to": json.RawMessage(`{"value":"a"}`)},
			}},
			check: func(t *testing.T, r reply) {
				if _, ok := r.Result["modifications"]; ok {
					t.Errorf("a refused MODIFY still carries modifications: %s", r.raw)
				}
			}},
		{name: "modify mixing modified_content and redactions is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: "modified_content",
			decision: guardian.Decision{Disposition: guardian.Modify, Reasoning: "x", Modifications: &acs.Modifications{
				ModifiedContent: str("x"), Redactions: []acs.Redaction{{Path: "/payload/arguments/a"}},
			}}},
		{name: "modify without modifications is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: "empty",
			decision: guardian.Decision{Disposition: guardian.Modify, Reasoning: "x"}},
		{name: "ask to an approver-capable client", want: "ask",
			edit:     func(c *guardian.Config) { c.ApproverCapable = func(string) bool { return true } },
			decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "wire transfers need approval", Ask: &acs.AskDetails{Approver: approver}},
			check: func(t *testing.T, r reply) {
				ad, _ := r.Result["ask_details"].(map[string]any)
				ap, _ := ad["approver"].(map[string]any)
				if ap["type"] != "human" || ap["id"] != "alice" || ap["endpoint"] != "https://approvals.example/alice" {
					t.Errorf("ask_details = %v, want approver {human, alice, https://approvals.example/alice}", ad)
				}
			}},
		{name: "ask to an approver-incapable client becomes deny", want: "deny", codes: []string{"approver_unavailable"}, reason: "no approver capability",
			decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "wire transfers need approval", Ask: &acs.AskDetails{Approver: approver}}},
		{name: "ask to an approver-incapable client becomes defer", want: "defer", codes: []string{"ask_substituted"},
			decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "needs approval", Ask: &acs.AskDetails{Approver: approver}, AskFallback: guardian.Defer},
			check: func(t *testing.T, r reply) {
				dd, _ := r.Result["defer_details"].(map[string]any)
				if dd["timeout_decision"] != "deny" {
					t.Errorf("substituted DEFER: timeout_decision = %v, want deny", dd["timeout_decision"])
				}
				if _, ok := r.Result["ask_details"]; ok {
					t.Errorf("substituted answer still carries ask_details")
				}
			}},
		{name: "ask to an approver type not routed", want: "deny", codes: []string{"invalid_policy_decision"}, reason: `"service"`,
			decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "x", Ask: &acs.AskDetails{Approver: acs.Approver{Type: "service", ID: "svc"}}}},
		{name: "defer gets its required fields", want: "defer",
			decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "waiting for the CMDB", Defer: &acs.DeferDetails{Reason: "pending_dependency"}},
			check: func(t *testing.T, r reply) {
				dd, _ := r.Result["defer_details"].(map[string]any)
				// resolution_method is filled in (retry) when the policy
				// gives none; an absent member fails here.
				if dd["timeout_decision"] != "deny" || dd["resolution_timeout_ms"] != float64(60000) || dd["resolution_method"] != "retry" || dd["reason"] != "pending_dependency" {
					t.Errorf("defer_details = %v", dd)
				}
			}},
		{name: "defer with an unknown reason is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: "not one of",
			decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "x", Defer: &acs.DeferDetails{Reason: "bored"}}},
		{name: "defer with timeout_decision ask is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: "timeout_decision",
			decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "x", Defer: &acs.DeferDetails{TimeoutDecision: guardian.Ask}}},
		{name: "unknown disposition is refused", want: "deny", codes: []string{"invalid_policy_decision"}, reason: `"redact"`,
			decision: guardian.Decision{Disposition: "redact"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e := newErrEnv(t, func(c *guardian.Config) {
				c.ApproverTypes = []string{"human"}
				c.Policy = &guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1", Rules: []guardian.TestRule{{ID: "row", Method: "steps/toolCallRequest", Decision: r.decision}}}
				if r.edit != nil {
					r.edit(c)
				}
			}, true)
			got := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("send_email"), nil)))
			mustResult(t, got)
			hmacChecker(t, e.a.sessionID, got.raw)
			if got.decision() != r.want {
				t.Fatalf("decision %q, want %q: %s", got.decision(), r.want, got.raw)
			}
			for _, c := range r.codes {
				if !slices.Contains(got.reasonCodes(), c) {
					t.Errorf("reason_codes %v lack %q", got.reasonCodes(), c)
				}
			}
			if !strings.Contains(got.str("reasoning"), r.reason) {
				t.Errorf("reasoning %q lacks %q", got.str("reasoning"), r.reason)
			}
			if !hexHash.MatchString(got.str("chain_hash")) {
				t.Errorf("no chain_hash: %s", got.raw)
			}
			if r.check != nil {
				r.check(t, got)
			}
			// The entry records the decision that was sent.
			entries := verifyStoredChain(t, e.s.store, e.a.sessionID, got.str("chain_hash"))
			var c struct {
				Decision struct {
					Disposition string `json:"disposition"`
				} `json:"decision"`
			}
			_ = json.Unmarshal(entries[len(entries)-1].Content, &c)
			if c.Decision.Disposition != r.want {
				t.Errorf("entry records %q, sent %q", c.Decision.Disposition, r.want)
			}
		})
	}
}

// TestDeferralBound: DEFER decisions are bounded per session (ACS §6); past
// the bound the Guardian denies.
func TestDeferralBound(t *testing.T) {
	e := newErrEnv(t, func(c *guardian.Config) {
		c.MaxDeferrals = 2
		c.Policy = &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "d", Decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "unsure", Defer: &acs.DeferDetails{Reason: "low_confidence"}}}}}
	}, true)
	var got []string
	for range 4 {
		r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
		mustResult(t, r)
		got = append(got, r.decision())
		if r.decision() == "deny" && !slices.Contains(r.reasonCodes(), "deferral_limit") {
			t.Errorf("deny past the bound lacks deferral_limit: %s", r.raw)
		}
	}
	if want := []string{"defer", "defer", "deny", "deny"}; !slices.Equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
}

// TestChainMismatch: a client chain_hash that is not the head gets a DENY
// with reason_codes ["chain_mismatch"], still chained (ACS §8.6).
func TestChainMismatch(t *testing.T) {
	e := newErrEnv(t, nil, true)
	first := decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", map[string]any{}, nil)))
	head := first.str("chain_hash")
	bogus := strings.Repeat("ab", 32)
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), withHead(bogus))))
	mustResult(t, r)
	if r.decision() != "deny" || !slices.Equal(r.reasonCodes(), []string{"chain_mismatch"}) || !strings.Contains(r.str("reasoning"), bogus) || !strings.Contains(r.str("reasoning"), head) {
		t.Fatalf("chain mismatch answer: %s", r.raw)
	}
	hmacChecker(t, e.a.sessionID, r.raw)
	ok := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), withHead(r.str("chain_hash")))))
	if ok.decision() != "allow" {
		t.Fatalf("matching chain_hash: %s", ok.raw)
	}
	verifyStoredChain(t, e.s.store, e.a.sessionID, ok.str("chain_hash"))
}

// TestPolicyFailure: a policy error is a decision failure (ACS §6.4): a
// signed error under posture proceed, a signed chained DENY under deny.
func TestPolicyFailure(t *testing.T) {
	for _, posture := range []string{guardian.PostureProceed, guardian.PostureDeny} {
		t.Run(posture, func(t *testing.T) {
			e := newErrEnv(t, func(c *guardian.Config) {
				c.OnDecisionFailure = posture
				c.Policy = &guardian.TestPolicy{Err: context.DeadlineExceeded}
			}, true)
			r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
			hmacChecker(t, e.a.sessionID, r.raw)
			if posture == guardian.PostureProceed {
				mustError(t, r, -32603, "policy_failure", "on_decision_failure")
				return
			}
			mustResult(t, r)
			if r.decision() != "deny" || !slices.Contains(r.reasonCodes(), "policy_failure") || !hexHash.MatchString(r.str("chain_hash")) {
				t.Fatalf("posture deny: %s", r.raw)
			}
		})
	}
}

// TestLedgerFailure: when the ledger refuses the entry, the answer is never
// an allow and never unsigned; it carries no chain_hash because nothing was
// published (ACS §6.4, §8.6).
func TestLedgerFailure(t *testing.T) {
	huge := strings.Repeat("x", 2<<20) // over the ledger's 1 MiB entry cap
	for _, posture := range []string{guardian.PostureProceed, guardian.PostureDeny} {
		t.Run(posture, func(t *testing.T) {
			e := newErrEnv(t, func(c *guardian.Config) {
				c.OnDecisionFailure = posture
				c.MaxBodyBytes = 4 << 20
				c.Policy = &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "big", Decision: guardian.Decision{Disposition: guardian.Allow, Reasoning: huge}}}}
			}, true)
			r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
			hmacChecker(t, e.a.sessionID, r.raw)
			if _, ok := r.Result["chain_hash"]; ok {
				t.Fatalf("a failed append published a chain_hash: %s", r.raw)
			}
			if posture == guardian.PostureProceed {
				mustError(t, r, -32603, "ledger_unavailable", "could not be recorded")
			} else if r.decision() != "deny" || !slices.Equal(r.reasonCodes(), []string{"ledger_unavailable"}) {
				t.Fatalf("posture deny: %s", r.raw)
			}
		})
	}
	t.Run("store closed", func(t *testing.T) {
		e := newErrEnv(t, func(c *guardian.Config) { c.OnDecisionFailure = guardian.PostureDeny }, true)
		if err := e.s.store.Close(); err != nil {
			t.Fatal(err)
		}
		r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
		hmacChecker(t, e.a.sessionID, r.raw)
		if r.decision() != "deny" || !slices.Equal(r.reasonCodes(), []string{"ledger_unavailable"}) {
			t.Fatalf("closed store: %s", r.raw)
		}
	})
}

type panickingPolicy struct{}

func (panickingPolicy) Decide(context.Context, guardian.Input) (guardian.Decision, error) {
	panic("bug in policy")
}

// TestPolicyPanic: a panicking policy is a decision failure; the Guardian
// keeps serving.
func TestPolicyPanic(t *testing.T) {
	e := newErrEnv(t, func(c *guardian.Config) {
		c.Policy = panickingPolicy{}
		c.OnDecisionFailure = guardian.PostureDeny
	}, true)
	for range 2 {
		r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
		if r.decision() != "deny" || !slices.Contains(r.reasonCodes(), "policy_failure") {
			t.Fatalf("panicking policy: %s", r.raw)
		}
	}
}
