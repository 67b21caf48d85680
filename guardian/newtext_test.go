package guardian_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/schemas"
	"github.com/acsledger/acsledger/guardian"
)

// The tests of this file send what a client written from the newest ACS
// text (spec/acs/docs) sends, not what this repository's fixtures expect
// (issue 21).

// coreHello is the ClientHello of an ACS-Core client that produces no
// provenance and declares every method by wildcard.
func coreHello(h map[string]any) {
	h["provenance_producer"] = "none"
	h["profiles_supported"] = []string{"acs-core"}
	h["methods_implemented"] = []string{"steps/*", "agbom/*", "protocols/MCP/*", wrappedToolsCall, "system/ping"}
}

// withoutProvenance returns v as JSON with every "provenance" member
// removed, at any depth.
func withoutProvenance(v any) any {
	b, _ := json.Marshal(v)
	var doc any
	_ = json.Unmarshal(b, &doc)
	var drop func(v any)
	drop = func(v any) {
		if m, ok := v.(map[string]any); ok {
			delete(m, "provenance")
			for _, c := range m {
				drop(c)
			}
		}
		for _, c := range asSlice(v) {
			drop(c)
		}
	}
	drop(doc)
	return doc
}

// wrappedToolsCall is MCP's tools/call in the version-pinned form (ACS §3),
// of the version the test agent declares in wrapped_protocols.
const wrappedToolsCall = "wrapped:mcp-2025-06-18/tools/call"

// chainedMethods are every chained method of TestAllHooks and the
// version-pinned MCP form, sessionEnd last.
func chainedMethods() []string {
	ms := slices.DeleteFunc(slices.Clone(guardian.Steps), func(m string) bool { return m == guardian.MethodSessionEnd })
	return append(ms, "agbom/snapshot", "agbom/changed", "protocols/MCP/tools/call", "protocols/MCP/resources/read", wrappedToolsCall, guardian.MethodSessionEnd)
}

// newTextPayloads are hookPayloads with the version-pinned MCP form.
func newTextPayloads() map[string]map[string]any {
	p := hookPayloads()
	p[wrappedToolsCall] = p["protocols/MCP/tools/call"]
	return p
}

// everything answers d to every step, with the details d requires.
func everything(d guardian.Disposition) *recordingPolicy {
	dec := guardian.Decision{Disposition: d, Reasoning: "the test policy says " + string(d)}
	switch d {
	case guardian.Modify:
		dec.Modifications = &acs.Modifications{Redactions: []acs.Redaction{{Path: "/payload/x"}}}
	case guardian.Ask:
		dec.Ask = &acs.AskDetails{Approver: acs.Approver{Type: "human", ID: "alice"}, RequestedCapabilities: []string{"anything"}}
	case guardian.Defer:
		dec.Defer = &acs.DeferDetails{Reason: "low_confidence"}
	}
	return &recordingPolicy{TestPolicy: guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1", Rules: []guardian.TestRule{{ID: "all", Decision: dec}}}}
}

// TestHooksWithoutProvenance: an ACS-Core client (provenance_producer
// "none") sends every hook with no provenance anywhere, under a policy
// that allows everything and one that asks for everything; every step is
// decided (ACS §7: provenance is OPTIONAL in the base schemas), with a
// disposition its hook may carry, and its entry carries no
// provenance_summary (the session produces none, so acs-audit is not
// accepted).
func TestHooksWithoutProvenance(t *testing.T) {
	for _, d := range []guardian.Disposition{guardian.Allow, guardian.Ask} {
		t.Run("policy "+string(d), func(t *testing.T) {
			pol := everything(d)
			_, edit := approverSetup(t, pol)
			e := newErrEnv(t, edit, false)
			hello := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, coreHello), nil)))
			mustResult(t, hello)
			if got := asSlice(hello.Result["profiles_accepted"]); len(got) != 1 || got[0] != "acs-core" {
				t.Fatalf("profiles_accepted %v, want [acs-core]", got)
			}
			payloads := newTextPayloads()
			head := ""
			for _, m := range chainedMethods() {
				p := withoutProvenance(payloads[m])
				if b, _ := json.Marshal(p); m != guardian.MethodSkillRegister && strings.Contains(string(b), "provenance") {
					t.Fatalf("%s payload still has provenance: %s", m, b)
				}
				r := decode(t, e.tp.send(t, e.a.envelope(t, m, p, nil)))
				if r.Error != nil {
					t.Fatalf("%s without provenance: %s", m, r.raw)
				}
				allowed, _ := guardian.AllowedDispositions(m)
				if !slices.Contains(allowed, guardian.Disposition(r.decision())) {
					t.Errorf("%s answered %s, not one of %v", m, r.decision(), allowed)
				}
				if d == guardian.Ask && m == "steps/toolCallRequest" && r.decision() != "ask" {
					t.Errorf("toolCallRequest under an asking policy: %s", r.raw)
				}
				head = r.str("chain_hash")
			}
			for _, en := range verifyStoredChain(t, e.s.store, e.a.sessionID, head) {
				if strings.Contains(string(en.Content), "provenance_summary") {
					t.Fatalf("entry of a session without provenance carries a provenance_summary: %s", en.Content)
				}
			}
		})
	}
}

// TestProvenanceProfileIsStrict: a client that declares acs-provenance
// with provenance_producer "deterministic" has it accepted, and its
// payloads are held to the strict *.acs-provenance.json schemas: a
// data-bearing field without provenance is -32602 naming the strict
// schema; with provenance the step is decided, and its entry carries the
// step's provenance_summary (ACS §7, §8.3; conformance, ACS-Provenance and
// ACS-Audit).
func TestProvenanceProfileIsStrict(t *testing.T) {
	e := newErrEnv(t, nil, false)
	hello := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, func(h map[string]any) {
		h["profiles_supported"] = []string{"acs-core", "acs-audit", "acs-provenance"}
	}), nil)))
	mustResult(t, hello)
	accepted := asSlice(hello.Result["profiles_accepted"])
	if !slices.Contains(accepted, any("acs-provenance")) || !slices.Contains(accepted, any("acs-audit")) {
		t.Fatalf("profiles_accepted %v, want acs-provenance and acs-audit", accepted)
	}
	payload := hookPayloads()["steps/userMessage"]
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/userMessage", withoutProvenance(payload), nil)))
	mustError(t, r, -32602, "schema_violation", "user-message.acs-provenance.json")
	r = decode(t, e.tp.send(t, e.a.envelope(t, "steps/userMessage", payload, nil)))
	mustResult(t, r)
	entries := verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
	var en struct {
		Summary *struct {
			OriginsSeen []string       `json:"origins_seen"`
			EntryCount  int            `json:"entry_count"`
			ByOrigin    map[string]int `json:"entry_count_by_origin"`
		} `json:"provenance_summary"`
	}
	last := entries[len(entries)-1]
	if err := json.Unmarshal(last.Content, &en); err != nil || en.Summary == nil {
		t.Fatalf("entry without provenance_summary: %s", last.Content)
	}
	if !slices.Equal(en.Summary.OriginsSeen, []string{"user_input"}) || en.Summary.EntryCount != 1 || en.Summary.ByOrigin["user_input"] != 1 {
		t.Errorf("provenance_summary %+v", *en.Summary)
	}
	var m map[string]any
	_ = json.Unmarshal(last.Content, &m)
	m["entry_hash"] = last.EntryHash.String()
	b, _ := json.Marshal(m)
	if err := schemas.Validate(schemas.ContextEntry, b); err != nil {
		t.Errorf("entry does not match context-entry.json: %v", err)
	}
}

// TestDispositionTable walks every row of the per-hook disposition table
// (guardian.AllowedDispositions, from the newest text's hook pages) with a
// policy that answers each of the five dispositions to every step: an
// answer the hook may carry is sent as is; any other becomes DENY at a
// decision-eligible hook and ALLOW at one that is not, with the reason
// code and audit event that say so; a replaced ASK leaves no pending ASK
// and a replaced DEFER does not count toward the deferral bound.
func TestDispositionTable(t *testing.T) {
	for _, d := range []guardian.Disposition{guardian.Allow, guardian.Deny, guardian.Modify, guardian.Ask, guardian.Defer} {
		t.Run(string(d), func(t *testing.T) {
			pol := everything(d)
			alice, edit := approverSetup(t, pol)
			e := newErrEnv(t, func(c *guardian.Config) { edit(c); c.MaxDeferrals = 1000 }, false)
			mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, coreHello), nil))))
			payloads := newTextPayloads()
			deferrals := 0
			for _, m := range chainedMethods() {
				allowed, section := guardian.AllowedDispositions(m)
				if section == "" {
					t.Fatalf("%s: no section cited", m)
				}
				r := decode(t, e.tp.send(t, e.a.envelope(t, m, withoutProvenance(payloads[m]), nil)))
				mustResult(t, r)
				en := lastStepEntry(t, e, r.str("chain_hash"))
				if en.Metadata.Deferrals != deferrals {
					t.Errorf("%s: entry records %d deferrals before it, %d DEFERs were sent", m, en.Metadata.Deferrals, deferrals)
				}
				want, code, event := d, "", ""
				switch {
				case m == guardian.MethodSkillLoad && d != guardian.Allow:
					// The registration was not approved: the skill rules
					// deny the load whatever the policy said.
					want = guardian.Deny
				case slices.Contains(allowed, d):
				case m == guardian.MethodPostCompact:
					want, code, event = guardian.Allow, guardian.ReasonPostCompactNotDenied, "post_compact_"+string(d)+"_not_sent"
				case slices.Contains(allowed, guardian.Deny):
					want, code, event = guardian.Deny, guardian.ReasonDispositionNotAllowed, guardian.ReasonDispositionNotAllowed
				default:
					want, code, event = guardian.Allow, guardian.ReasonDispositionNotAllowed, guardian.ReasonDispositionNotAllowed
				}
				if r.decision() != string(want) || (code != "" && !slices.Contains(r.reasonCodes(), code)) {
					t.Errorf("%s, policy %s (%s): sent %s %v, want %s with %q", m, d, section, r.decision(), r.reasonCodes(), want, code)
				}
				if event != "" && !slices.Contains(en.AuditEvents, event) {
					t.Errorf("%s, policy %s: audit events %v lack %q", m, d, en.AuditEvents, event)
				}
				if r.decision() == "defer" {
					deferrals++
				}
				if d == guardian.Ask && want != guardian.Ask {
					_, err := e.s.g.ResolveAsk(t.Context(), signedApproval(t, alice, e.a.sessionID, r.str("request_id"), guardian.Allow, ""))
					if want := guardian.ErrNoPendingAsk; !errors.Is(err, want) && (m != guardian.MethodSessionEnd || !errors.Is(err, guardian.ErrSessionSealed)) {
						t.Errorf("%s: an ASK the hook may not carry left a pending ASK (ResolveAsk: %v)", m, err)
					}
				}
			}
		})
	}
}

// stepEntry is what the tests read of a step's entry.
type stepEntry struct {
	AuditEvents []string `json:"audit_events"`
	Metadata    struct {
		Deferrals int `json:"deferrals"`
	} `json:"metadata"`
}

// lastStepEntry reads the session's last entry, whose entry_hash is head.
func lastStepEntry(t *testing.T, e *errEnv, head string) stepEntry {
	t.Helper()
	sess, err := e.s.store.Session(t.Context(), e.a.sessionID)
	if err != nil || sess.Head.String() != head {
		t.Fatalf("session %+v, %v; want head %s", sess, err, head)
	}
	es, err := e.s.store.Entries(t.Context(), e.a.sessionID, sess.Length-1, 1)
	if err != nil || len(es) != 1 {
		t.Fatalf("last entry: %v", err)
	}
	var en stepEntry
	if err := json.Unmarshal(es[0].Content, &en); err != nil {
		t.Fatal(err)
	}
	return en
}

// TestSealedSession: steps/sessionEnd seals the chain (hooks, sessionEnd):
// a new handshake with the same session_id is refused with a JSON-RPC
// error naming why, by the same Guardian and after a restart, on both
// stores; an approval of an ASK the session left pending is refused too;
// the chain is unchanged.
func TestSealedSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newAskedEnv(t, kind)
		end := e.send(t, guardian.MethodSessionEnd, map[string]any{"session_reason": "completed"})
		refused := func(tp transport, g *guardian.Guardian) {
			t.Helper()
			r := decode(t, tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, nil), nil)))
			mustError(t, r, -32000, guardian.ReasonSessionSealed, "steps/sessionEnd")
			if _, err := g.ResolveAsk(t.Context(), e.approve(t, e.ask.str("request_id"), guardian.Allow, "session")); !errors.Is(err, guardian.ErrSessionSealed) {
				t.Errorf("approval in a sealed session: %v, want ErrSessionSealed", err)
			}
		}
		refused(e.tp, e.g)
		g2 := e.s.another(t)
		tp2 := newHTTP(t, g2)
		refused(tp2, g2)
		mustError(t, decode(t, tp2.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))), -32003, "no_handshake", "handshake/hello")
		verifyStoredChain(t, e.s.store, e.a.sessionID, end.str("chain_hash"))
	})
}

// TestGrantBeforeAgentReturns: an approver's grant does not wait for the
// agent: after an ASK the Guardian restarts, or forgets the idle session,
// the grant is accepted from the ledger with no new handshake, and the
// agent's next step, after its handshake, sees it (ACS §9, §9.1).
func TestGrantBeforeAgentReturns(t *testing.T) {
	forgets := []struct {
		name string
		// forget makes the Guardian lose the session without the agent
		// shaking hands, and returns the Guardian that then serves it.
		forget func(t *testing.T, e *askedEnv) *guardian.Guardian
	}{
		{"restart", func(t *testing.T, e *askedEnv) *guardian.Guardian { return e.s.another(t) }},
		{"idle eviction", func(t *testing.T, e *askedEnv) *guardian.Guardian {
			e.s.clock.Set(e.s.clock.Now().Add(11 * time.Minute))
			newAgent(t, mustKeys(t).hmac, e.s.clock.Now).shakeHands(t, e.tp) // sweeps
			return e.g
		}},
	}
	forEachStore(t, func(t *testing.T, kind string) {
		for _, f := range forgets {
			t.Run(f.name, func(t *testing.T) {
				e := newAskedEnv(t, kind)
				g := f.forget(t, e)
				grant := e.approve(t, e.ask.str("request_id"), guardian.Allow, "session")
				res, err := g.ResolveAsk(t.Context(), grant)
				if err != nil {
					t.Fatalf("grant before the agent returns: %v", err)
				}
				// The same approval again is refused: the ASK is answered.
				if _, err := g.ResolveAsk(t.Context(), grant); !errors.Is(err, guardian.ErrNoPendingAsk) {
					t.Errorf("a second answer: %v, want ErrNoPendingAsk", err)
				}
				e.g, e.tp = g, newHTTP(t, g)
				e.a.shakeHands(t, e.tp)
				r := e.send(t, "steps/toolCallRequest", toolCall("read_file"))
				if got := parsedOf(e.pol.last().Intent); !slices.Equal(got, []string{"invoice.read", "payments.send"}) {
					t.Fatalf("the agent's next step saw intent %v", got)
				}
				if r.str("previous_chain_hash") != res.ChainHash {
					t.Errorf("previous_chain_hash %q, want the grant's head %s", r.str("previous_chain_hash"), res.ChainHash)
				}
				verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
			})
		}
	})
}

// TestKeyBindingSurvivesRestart: a session stays bound to the key that
// signed its requests after a restart: another key the Guardian trusts,
// naming the same agent, cannot take it over; the bound key can.
func TestKeyBindingSurvivesRestart(t *testing.T) {
	e := newResumeEnv(t, "sqlite", nil)
	e.send(t, "steps/sessionStart", map[string]any{})
	g2 := e.s.another(t)
	tp := newHTTP(t, g2)
	thief := newAgent(t, mustKeys(t).other, e.s.clock.Now)
	thief.sessionID, thief.agentID = e.a.sessionID, e.a.agentID
	otherSigner, _ := mustKeys(t).other.Signer(e.a.sessionID)
	thief.signer = otherSigner
	mustError(t, decode(t, tp.send(t, thief.envelope(t, guardian.MethodHello, thief.hello(t, nil), nil))), -32000, "session_bound_elsewhere", "bound to the key")
	e.a.shakeHands(t, tp)
}

// TestServerHelloTraceEmission: trace_emission says whether the Guardian
// emits ACS-Trace spans (--acs-trace, Config.TraceSteps), ACS §4.
func TestServerHelloTraceEmission(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := newErrEnv(t, func(c *guardian.Config) { c.TraceSteps = on }, false)
		r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, nil), nil)))
		mustResult(t, r)
		te, _ := r.Result["trace_emission"].(map[string]any)
		if te["otel_enabled"] != on || te["ocsf_enabled"] != false {
			t.Errorf("TraceSteps %v: trace_emission %v", on, te)
		}
	}
}

// TestPingCarriesServerTimestamp: every system/ping answer's payload holds
// status, server_timestamp (an RFC 3339 time) and the echo when one was
// sent (ACS §13), with or without a session.
func TestPingCarriesServerTimestamp(t *testing.T) {
	e := newErrEnv(t, nil, false)
	check := func(when string, echo *string) {
		t.Helper()
		p := map[string]any{}
		if echo != nil {
			p["echo"] = *echo
		}
		r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPing, p, nil)))
		mustResult(t, r)
		payload, _ := r.Result["payload"].(map[string]any)
		ts, ok := payload["server_timestamp"]
		if !ok {
			t.Fatalf("%s: payload has no server_timestamp: %s", when, r.raw)
		}
		s, _ := ts.(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("%s: server_timestamp %v is not RFC 3339: %v", when, ts, err)
		}
		if payload["status"] != "ok" {
			t.Errorf("%s: status %v", when, payload["status"])
		}
		if _, has := payload["echo"]; has != (echo != nil) || (echo != nil && payload["echo"] != *echo) {
			t.Errorf("%s: echo %v, sent %v", when, payload["echo"], echo)
		}
	}
	x, empty := "x", ""
	check("no session", nil)
	check("no session, empty echo", &empty)
	e.a.shakeHands(t, e.tp)
	check("in a session", &x)
}
