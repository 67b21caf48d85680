package guardian_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
)

// resumeEnv is one agent's session with a Guardian that can be restarted
// or made to forget the session, over real HTTP and a real store.
type resumeEnv struct {
	s  *setup
	g  *guardian.Guardian
	tp transport
	a  *agent
}

func newResumeEnv(t *testing.T, kind string, edit func(*guardian.Config)) *resumeEnv {
	t.Helper()
	s := newSetup(t, kind, func(c *guardian.Config) {
		c.SessionIdle = 10 * time.Minute
		if edit != nil {
			edit(c)
		}
	})
	e := &resumeEnv{s: s, g: s.g, tp: newHTTP(t, s.g), a: newAgent(t, mustKeys(t).hmac, s.clock.Now)}
	e.a.shakeHands(t, e.tp)
	return e
}

func (e *resumeEnv) send(t *testing.T, method string, payload any) reply {
	t.Helper()
	r := decode(t, e.tp.send(t, e.a.envelope(t, method, payload, nil)))
	mustResult(t, r)
	return r
}

// losses are the two ways a Guardian loses a session's memory: a restart
// (a new Guardian over the same ledger, losses[0]) and idle eviction. Either way the
// agent shakes hands again and the session continues.
var losses = []struct {
	name string
	lose func(t *testing.T, e *resumeEnv)
}{
	{"restart", func(t *testing.T, e *resumeEnv) {
		g := e.s.another(t)
		e.g, e.tp = g, newHTTP(t, g)
		e.a.shakeHands(t, e.tp)
	}},
	{"idle eviction", func(t *testing.T, e *resumeEnv) {
		e.s.clock.Set(e.s.clock.Now().Add(11 * time.Minute))
		other := newAgent(t, mustKeys(t).hmac, e.s.clock.Now)
		other.shakeHands(t, e.tp)
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))), -32003, "no_handshake", "handshake/hello")
		e.a.shakeHands(t, e.tp)
	}},
}

// forEachLoss runs f for both stores and both ways of losing the session.
func forEachLoss(t *testing.T, f func(t *testing.T, kind string, lose func(*testing.T, *resumeEnv))) {
	forEachStore(t, func(t *testing.T, kind string) {
		for _, l := range losses {
			t.Run(l.name, func(t *testing.T) { f(t, kind, l.lose) })
		}
	})
}

// forEachStore runs f as a subtest per store kind, sqlite and postgres.
func forEachStore(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
	}
}

// TestIntentImmutableAcrossResume: after a restart or an idle eviction, an
// agentTrigger carrying a wider Intent is still ignored, recorded as an
// audit event, and the policy keeps seeing the Intent sessionStart
// established (ACS §8.4).
func TestIntentImmutableAcrossResume(t *testing.T) {
	forEachLoss(t, func(t *testing.T, kind string, lose func(*testing.T, *resumeEnv)) {
		pol := &recordingPolicy{}
		e := newResumeEnv(t, kind, func(c *guardian.Config) { c.Policy = pol })
		e.send(t, "steps/sessionStart", intentPayload("invoice.read"))
		lose(t, e)
		r := e.send(t, "steps/agentTrigger", intentPayload("invoice.read", "payments.send"))
		if got := parsedOf(pol.last().Intent); !slices.Equal(got, []string{"invoice.read"}) {
			t.Fatalf("the agentTrigger's policy saw intent %v", got)
		}
		mustIgnoreIntent(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
		e.send(t, "steps/toolCallRequest", toolCall("pay"))
		if got := parsedOf(pol.last().Intent); !slices.Equal(got, []string{"invoice.read"}) {
			t.Fatalf("the next step's policy saw intent %v", got)
		}
	})
}

// TestDeferralBoundAcrossResume: the per-session bound on DEFER decisions
// (ACS §6) counts the deferrals made before a restart or an idle eviction.
func TestDeferralBoundAcrossResume(t *testing.T) {
	forEachLoss(t, func(t *testing.T, kind string, lose func(*testing.T, *resumeEnv)) {
		e := newResumeEnv(t, kind, func(c *guardian.Config) {
			c.MaxDeferrals = 2
			c.Policy = &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "d", Decision: guardian.Decision{Disposition: guardian.Defer, Reasoning: "unsure", Defer: &acs.DeferDetails{Reason: "low_confidence"}}}}}
		})
		var got []string
		for i := range 4 {
			if i == 2 {
				lose(t, e)
			}
			r := e.send(t, "steps/toolCallRequest", toolCall("x"))
			got = append(got, r.decision())
			if r.decision() == "deny" && !slices.Contains(r.reasonCodes(), "deferral_limit") {
				t.Errorf("deny past the bound lacks deferral_limit: %s", r.raw)
			}
		}
		if want := []string{"defer", "defer", "deny", "deny"}; !slices.Equal(got, want) {
			t.Fatalf("decisions %v, want %v", got, want)
		}
	})
}

// askPolicy asks alice before any payment.
func askPolicy() *recordingPolicy {
	return &recordingPolicy{TestPolicy: guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1", Rules: []guardian.TestRule{{
		ID: "payments_need_approval", Tool: "pay",
		Decision: guardian.Decision{Disposition: guardian.Ask, Reasoning: "payments are outside the intent", Ask: &acs.AskDetails{
			Approver:              acs.Approver{Type: "human", ID: "alice"},
			RequestedCapabilities: []string{"payments.send"},
		}},
	}}}}
}

// approverSetup configures alice as an approver the Guardian trusts and
// returns her key.
func approverSetup(t *testing.T, pol guardian.Policy) (*sig.PrivateKey, func(*guardian.Config)) {
	t.Helper()
	alice, err := sig.GenerateKey(sig.ECDSAP256, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := sig.NewKeySet(alice.Public())
	if err != nil {
		t.Fatal(err)
	}
	return alice, func(c *guardian.Config) {
		c.Policy = pol
		c.ApproverTypes = []string{"human"}
		c.ApproverCapable = func(string) bool { return true }
		c.ApproverKeys = ks
	}
}

// signedApproval is alice's answer to the ASK askID of session sid.
func signedApproval(t *testing.T, alice *sig.PrivateKey, sid, askID string, d guardian.Disposition, scope string) []byte {
	t.Helper()
	a := guardian.Approval{
		SessionID: sid, AskStepID: askID, Approver: acs.Approver{Type: "human", ID: "alice"},
		Decision: d, Timestamp: t0.Format(time.RFC3339),
	}
	if scope != "" {
		a.IntentExtension = &guardian.ApprovalExtension{Capabilities: []string{"payments.send"}, Scope: scope}
	}
	s, err := alice.Signer("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := guardian.SignApproval(a, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// askedEnv is a session whose Intent is invoice.read and whose pay call
// waits on alice's answer to the ASK the policy raised.
type askedEnv struct {
	*resumeEnv
	pol   *recordingPolicy
	alice *sig.PrivateKey
	ask   reply
}

func newAskedEnv(t *testing.T, kind string) *askedEnv {
	t.Helper()
	pol := askPolicy()
	alice, edit := approverSetup(t, pol)
	e := &askedEnv{resumeEnv: newResumeEnv(t, kind, edit), pol: pol, alice: alice}
	e.send(t, "steps/sessionStart", intentPayload("invoice.read"))
	e.ask = e.send(t, "steps/toolCallRequest", toolCall("pay"))
	if e.ask.decision() != "ask" {
		t.Fatalf("want ASK: %s", e.ask.raw)
	}
	return e
}

// approve is alice's signed answer d to the ASK askID of the session.
func (e *askedEnv) approve(t *testing.T, askID string, d guardian.Disposition, scope string) []byte {
	return signedApproval(t, e.alice, e.a.sessionID, askID, d, scope)
}

// TestAsksAcrossResume: a pending ASK can still be answered after a
// restart or an idle eviction, an answered one cannot be answered again,
// and a grant of scope session or this_request made before the loss still
// reaches the policy after it (ACS §9, §9.1).
func TestAsksAcrossResume(t *testing.T) {
	forEachLoss(t, func(t *testing.T, kind string, lose func(*testing.T, *resumeEnv)) {
		// A pending ASK survives.
		ae := newAskedEnv(t, kind)
		e, pol, alice, ask := ae.resumeEnv, ae.pol, ae.alice, ae.ask
		lose(t, e)
		if _, err := e.g.ResolveAsk(t.Context(), signedApproval(t, alice, e.a.sessionID, ask.str("request_id"), guardian.Allow, "session")); err != nil {
			t.Fatalf("answering the ASK after resuming: %v", err)
		}

		// The grant survives the next loss.
		lose(t, e)
		e.send(t, "steps/toolCallRequest", toolCall("read_file"))
		in := pol.last().Intent
		if got := parsedOf(in); !slices.Equal(got, []string{"invoice.read", "payments.send"}) || len(in.Extensions) != 1 || in.Extensions[0].AskStepID != ask.str("request_id") {
			t.Fatalf("after resuming, the policy saw intent %+v", in)
		}

		// A denied ASK stays answered.
		ask2 := e.send(t, "steps/toolCallRequest", toolCall("pay"))
		if _, err := e.g.ResolveAsk(t.Context(), signedApproval(t, alice, e.a.sessionID, ask2.str("request_id"), guardian.Deny, "")); err != nil {
			t.Fatal(err)
		}
		lose(t, e)
		if _, err := e.g.ResolveAsk(t.Context(), signedApproval(t, alice, e.a.sessionID, ask2.str("request_id"), guardian.Allow, "session")); !errors.Is(err, guardian.ErrNoPendingAsk) {
			t.Fatalf("a denied ASK answered again after resuming: %v, want ErrNoPendingAsk", err)
		}

		// A this_request grant reaches the request it answers after a
		// loss, and no other step (§9.1).
		ask3 := e.send(t, "steps/toolCallRequest", toolCall("pay"))
		if _, err := e.g.ResolveAsk(t.Context(), signedApproval(t, alice, e.a.sessionID, ask3.str("request_id"), guardian.Allow, "this_request")); err != nil {
			t.Fatal(err)
		}
		lose(t, e)
		e.send(t, "steps/toolCallRequest", toolCall("read_file"))
		if got := pol.last().Grants; len(got) != 0 {
			t.Fatalf("after resuming, a read_file call saw the grant made for the pay call: %v", got)
		}
		lose(t, e)
		r := e.send(t, "steps/toolCallRequest", toolCall("pay"))
		if got := pol.last().Grants; !slices.Equal(got, []string{"payments.send"}) {
			t.Fatalf("after resuming, the pay call a this_request grant answered saw grants %v", got)
		}
		verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
	})
}

// TestIntentEstablishedOnlyFirst: the Intent is established by sessionStart
// or the first agentTrigger before any content step (ACS §8.4); an
// agentTrigger after a content step, or after another agentTrigger, sets
// none, and its entry records the ignored attempt.
func TestIntentEstablishedOnlyFirst(t *testing.T) {
	cases := []struct {
		name   string
		before []string
		want   []string
	}{
		{"first agentTrigger after sessionStart", []string{"steps/sessionStart"}, []string{"invoice.read"}},
		{"first agentTrigger after the AgBOM snapshot", []string{"steps/sessionStart", guardian.MethodAgbomSnapshot}, []string{"invoice.read"}},
		{"agentTrigger after a content step", []string{"steps/sessionStart", "steps/userMessage"}, nil},
		{"second agentTrigger", []string{"steps/sessionStart", "steps/agentTrigger"}, nil},
	}
	payloads := hookPayloads()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := &recordingPolicy{}
			e := newErrEnv(t, func(cfg *guardian.Config) { cfg.Policy = pol }, true)
			for _, m := range c.before {
				mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, m, payloads[m], nil))))
			}
			r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/agentTrigger", intentPayload("invoice.read"), nil)))
			mustResult(t, r)
			entries := verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
			var ent struct {
				AuditEvents []string `json:"audit_events"`
			}
			_ = json.Unmarshal(entries[len(entries)-1].Content, &ent)
			if ignored := slices.Contains(ent.AuditEvents, "intent_modification_ignored"); ignored != (c.want == nil) {
				t.Fatalf("agentTrigger entry %s: ignored = %v", entries[len(entries)-1].Content, ignored)
			}
			mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))))
			if got := parsedOf(pol.last().Intent); !slices.Equal(got, c.want) {
				t.Fatalf("policy saw intent %v, want %v", got, c.want)
			}
		})
	}
}
