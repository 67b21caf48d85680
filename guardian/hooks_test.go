package guardian_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/guardian"
)

// hookPayloads holds a valid payload for each of the nineteen steps/*
// hooks of ACS §5 and the other chained methods. The skill hooks load the
// skill they register.
func hookPayloads() map[string]map[string]any {
	h := strings.Repeat("0", 64)
	return map[string]map[string]any{
		"steps/sessionStart":           {},
		"steps/agentTrigger":           {"trigger": "schedule"},
		"steps/turnStart":              {"turn_id": "t1"},
		"steps/userMessage":            {"content": text("hi", "p1", "user_input")},
		"steps/agentResponse":          {"content": text("hello", "p2", "agent_generated")},
		"steps/knowledgeRetrieval":     {"query": map[string]any{"value": "q3", "provenance": prov("p3", "agent_generated")}, "results": []any{map[string]any{"value": "doc", "provenance": prov("p4", "retrieved")}}},
		"steps/memoryContextRetrieval": {"results": []any{map[string]any{"value": "m", "provenance": prov("p5", "retrieved")}}},
		"steps/memoryStore":            {"content": map[string]any{"value": "remember", "provenance": prov("p6", "agent_generated")}},
		"steps/toolCallRequest":        toolCall("read_file"),
		"steps/toolCallResult":         {"tool": map[string]any{"name": "read_file"}, "exit_status": "success", "outputs": []any{}},
		"steps/preCompact":             {"entries_to_compact": []string{"s1"}, "triggered_by": "size_threshold"},
		"steps/postCompact":            {"summary": map[string]any{"value": "sum", "provenance": prov("p7", "agent_generated")}, "entries_compacted": []string{"s1"}, "pre_compact_chain_hash": h, "post_compact_chain_hash": h},
		"steps/subagentStart":          {"subagent_session_id": uuid()},
		"steps/subagentStop":           {"subagent_session_id": uuid(), "outcome": "completed"},
		"steps/skillRegister":          skillRegister("s-report", "ab", nil),
		"steps/skillLoad":              skillLoad("s-report", "ab", "s-report"),
		"steps/skillUnload":            {"skill_id": "s-report", "reason": "explicit_unload"},
		"steps/turnEnd":                {"turn_id": "t1", "outcome": "completed"},
		"steps/sessionEnd":             {},
		"agbom/snapshot":               {"agbom": map[string]any{}},
		"agbom/changed":                {"changes": []any{}},
		"protocols/MCP/tools/call":     {"name": "search", "arguments": map[string]any{}},
		"protocols/MCP/resources/read": {"uri": "file:///etc/hosts"},
	}
}

// TestAllHooks sends every steps/* hook, both agbom/* methods and MCP
// methods (wildcard-declared) and checks each is decided, chained and signed.
func TestAllHooks(t *testing.T) {
	e := newErrEnv(t, nil, false)
	methods := append(slices.Clone(guardian.Steps), "agbom/snapshot", "agbom/changed", "protocols/MCP/tools/call", "protocols/MCP/resources/read")
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, func(h map[string]any) {
		h["methods_implemented"] = []string{"steps/*", "agbom/*", "protocols/MCP/*"}
	}), nil))))
	if len(guardian.Steps) != 19 {
		t.Fatalf("%d native hooks, ACS §5 has 19 (the seed's 16 and the skill hooks)", len(guardian.Steps))
	}
	payloads := hookPayloads()
	head := ""
	// sessionEnd last: it ends the session.
	methods = append(slices.DeleteFunc(methods, func(m string) bool { return m == "steps/sessionEnd" }), "steps/sessionEnd")
	for _, m := range methods {
		r := decode(t, e.tp.send(t, e.a.envelope(t, m, payloads[m], nil)))
		mustResult(t, r)
		hmacChecker(t, e.a.sessionID, r.raw)
		if r.decision() != "allow" || !hexHash.MatchString(r.str("chain_hash")) || r.str("chain_hash") == head {
			t.Fatalf("%s: %s", m, r.raw)
		}
		head = r.str("chain_hash")
	}
	entries := verifyStoredChain(t, e.s.store, e.a.sessionID, head)
	for i, en := range entries {
		if en.StepType != methods[i] {
			t.Errorf("entry %d has step_type %s, want %s", i, en.StepType, methods[i])
		}
	}
}

// TestUnknownFieldsIgnored: unknown members of the ClientHello and of
// params are ignored (ACS §3, §4), not refused.
func TestUnknownFieldsIgnored(t *testing.T) {
	e := newErrEnv(t, nil, false)
	r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, func(h map[string]any) {
		h["x_future_capability"] = map[string]any{"level": 3}
	}), func(p map[string]any) { p["x_vendor_hint"] = "v" })))
	mustResult(t, r)
	r = decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", map[string]any{"x_new": true}, func(p map[string]any) {
		p["x_vendor_hint"] = "v"
		p["metadata"].(map[string]any)["x_trace"] = "abc"
	})))
	if r.decision() != "allow" {
		t.Fatalf("unknown members refused: %s", r.raw)
	}
}

// skillRegister is a skillRegister payload for skill id whose digest is
// digest repeated to 64 hex characters, composing the skills composed.
func skillRegister(id, digest string, composed []string) map[string]any {
	p := map[string]any{
		"skill_id": id,
		"definition": map[string]any{
			"ref":    "https://skills.example/" + id,
			"digest": map[string]any{"algorithm": "sha256", "value": strings.Repeat(digest, 32)},
		},
		"declared_capabilities":   []string{"filesystem.read"},
		"registration_provenance": prov("p-reg-"+id, "system"),
	}
	if composed != nil {
		p["composition"] = map[string]any{"composed_skills": composed}
	}
	return p
}

// skillLoad is a skillLoad payload for skill id with digest (as in
// skillRegister) along load path path, root first.
func skillLoad(id, digest string, path ...string) map[string]any {
	var lp []map[string]any
	for _, s := range path {
		lp = append(lp, map[string]any{"skill_id": s})
	}
	trigger := "user"
	if len(path) > 1 {
		trigger = "skill_composition"
	}
	return map[string]any{
		"skill_id":     id,
		"digest":       map[string]any{"algorithm": "sha256", "value": strings.Repeat(digest, 32)},
		"load_trigger": trigger,
		"load_path":    lp,
	}
}
