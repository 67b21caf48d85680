package guardian_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian"
)

// lastEntry returns the decision and audit events of the session's last
// entry, after checking the chain ends at head.
func lastEntry(t *testing.T, e *errEnv, head string) (string, []string) {
	t.Helper()
	entries := verifyStoredChain(t, e.s.store, e.a.sessionID, head)
	var c struct {
		Decision struct {
			Disposition string `json:"disposition"`
		} `json:"decision"`
		AuditEvents []string `json:"audit_events"`
	}
	if err := json.Unmarshal(entries[len(entries)-1].Content, &c); err != nil {
		t.Fatal(err)
	}
	return c.Decision.Disposition, c.AuditEvents
}

func postCompact() map[string]any { return hookPayloads()[guardian.MethodPostCompact] }

// TestPostCompactNeverDenied: postCompact is not decision-eligible and
// "MAY NOT return DENY" (ACS hooks): every DENY, the policy's and the
// Guardian's own (chain_mismatch, deferral_limit, policy_failure), and
// every ASK or DEFER there becomes ALLOW, keeps its reason codes, and is
// recorded as an audit event.
func TestPostCompactNeverDenied(t *testing.T) {
	deferPolicy := &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "d", Decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "unsure", Defer: &acs.DeferDetails{Reason: "low_confidence"}}}}}
	rows := []struct {
		name  string
		edit  func(*guardian.Config)
		setup func(t *testing.T, e *errEnv)
		// param edits the postCompact request's params.
		param func(p map[string]any)
		codes []string
		event string
	}{
		{name: "policy deny", edit: func(c *guardian.Config) {
			c.Policy = &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "no", Decision: guardian.Decision{Disposition: guardian.Deny, Reasoning: "summary leaks a secret", ReasonCodes: []string{"pii_detected"}}}}}
		}, codes: []string{"pii_detected", "post_compact_not_denied"}, event: "post_compact_deny_not_sent"},
		{name: "chain_mismatch", param: withHead(strings.Repeat("ab", 32)), codes: []string{"chain_mismatch", "post_compact_not_denied"}, event: "post_compact_deny_not_sent"},
		{name: "deferral_limit", edit: func(c *guardian.Config) { c.MaxDeferrals = 1; c.Policy = deferPolicy },
			setup: func(t *testing.T, e *errEnv) {
				if r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))); r.decision() != "defer" {
					t.Fatalf("want DEFER: %s", r.raw)
				}
			}, codes: []string{"deferral_limit", "post_compact_not_denied"}, event: "post_compact_deny_not_sent"},
		{name: "policy failure under posture deny", edit: func(c *guardian.Config) {
			c.OnDecisionFailure = guardian.PostureDeny
			c.Policy = &guardian.TestPolicy{Err: context.DeadlineExceeded}
		}, codes: []string{"policy_failure", "post_compact_not_denied"}, event: "post_compact_deny_not_sent"},
		{name: "defer", edit: func(c *guardian.Config) { c.Policy = deferPolicy },
			codes: []string{"post_compact_not_denied"}, event: "post_compact_defer_not_sent"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			e := newErrEnv(t, row.edit, true)
			if row.setup != nil {
				row.setup(t, e)
			}
			r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPostCompact, postCompact(), row.param)))
			mustResult(t, r)
			hmacChecker(t, e.a.sessionID, r.raw)
			if r.decision() != "allow" || !slices.Equal(r.reasonCodes(), row.codes) || !strings.Contains(r.str("reasoning"), "postCompact may not be denied") {
				t.Fatalf("postCompact answer: %s; want allow with reason_codes %v", r.raw, row.codes)
			}
			if d, events := lastEntry(t, e, r.str("chain_hash")); d != "allow" || !slices.Contains(events, row.event) {
				t.Fatalf("entry records %s with audit events %v, want allow and %s", d, events, row.event)
			}
		})
	}
}

// TestModifyUnsupported: for a client that cannot apply MODIFY (ACS §6.5),
// decided by the deployment (Config.ModifyCapable) or declared by the
// client at handshake (modify_supported: false), a MODIFY becomes DENY
// with reason_codes ["modify_unsupported"] and reasoning naming the
// modification, and the substitution is an audit event; at postCompact it
// becomes ALLOW with the same code and event. A capable client gets the
// MODIFY.
func TestModifyUnsupported(t *testing.T) {
	modify := guardian.Decision{Disposition: guardian.Modify, Reasoning: "redact the key", Modifications: &acs.Modifications{
		Redactions: []acs.Redaction{{Path: "/payload/arguments/command/value"}},
	}}
	pol := &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "m", Decision: modify}}}
	no := func(string) bool { return false }
	for _, c := range []struct {
		name     string
		capable  func(string) bool
		declared any // modify_supported in the ClientHello, nil for absent
		want     string
	}{
		{"capable", nil, nil, "modify"},
		{"deployment says incapable", no, nil, "deny"},
		{"client declares incapable", nil, false, "deny"},
		{"client declares capable, deployment says no", no, true, "deny"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newErrEnv(t, func(cfg *guardian.Config) { cfg.Policy = pol; cfg.ModifyCapable = c.capable }, false)
			mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, func(h map[string]any) {
				if c.declared != nil {
					h["modify_supported"] = c.declared
				}
			}), nil))))
			r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("bash"), nil)))
			mustResult(t, r)
			if r.decision() != c.want {
				t.Fatalf("toolCallRequest: %s, want %s", r.raw, c.want)
			}
			d, events := lastEntry(t, e, r.str("chain_hash"))
			if c.want == "modify" {
				if d != "modify" || len(events) != 0 {
					t.Fatalf("entry %s %v", d, events)
				}
				return
			}
			if !slices.Equal(r.reasonCodes(), []string{"modify_unsupported"}) || !strings.Contains(r.str("reasoning"), "redact /payload/arguments/command/value") || r.Result["modifications"] != nil {
				t.Fatalf("MODIFY for an incapable client: %s", r.raw)
			}
			if d != "deny" || !slices.Equal(events, []string{"modify_unsupported"}) {
				t.Fatalf("entry records %s with audit events %v", d, events)
			}
			// postCompact: ALLOW, the original summary stands.
			r = decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPostCompact, postCompact(), nil)))
			if r.decision() != "allow" || !slices.Equal(r.reasonCodes(), []string{"modify_unsupported"}) || !strings.Contains(r.str("reasoning"), "original summary stands") {
				t.Fatalf("postCompact MODIFY for an incapable client: %s", r.raw)
			}
			if d, events := lastEntry(t, e, r.str("chain_hash")); d != "allow" || !slices.Equal(events, []string{"modify_unsupported"}) {
				t.Fatalf("postCompact entry records %s with audit events %v", d, events)
			}
		})
	}
}

// TestAskSubstitutionAudited: an ASK substituted for a client that cannot
// route it (ACS §9.2), by DENY or by DEFER, is recorded as an audit event
// in the step's entry, not only as a reason code.
func TestAskSubstitutionAudited(t *testing.T) {
	for _, c := range []struct {
		fallback guardian.Disposition
		want     string
		event    string
	}{
		{guardian.Deny, "deny", "approver_unavailable"},
		{guardian.Defer, "defer", "ask_substituted"},
	} {
		t.Run(string(c.fallback), func(t *testing.T) {
			e := newErrEnv(t, func(cfg *guardian.Config) {
				cfg.ApproverTypes = []string{"human"}
				cfg.Policy = &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "a", Decision: guardian.Decision{
					Disposition: guardian.Ask, Reasoning: "needs approval", AskFallback: c.fallback,
					Ask: &acs.AskDetails{Approver: acs.Approver{Type: "human", ID: "alice"}},
				}}}}
			}, true)
			r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil)))
			if r.decision() != c.want {
				t.Fatalf("substituted ASK: %s", r.raw)
			}
			if d, events := lastEntry(t, e, r.str("chain_hash")); d != c.want || !slices.Equal(events, []string{c.event}) {
				t.Fatalf("entry records %s with audit events %v, want %s and [%s]", d, events, c.want, c.event)
			}
		})
	}
}
