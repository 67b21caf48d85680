package guardian_test

import (
	"slices"
	"testing"

	"github.com/acsledger/acsledger/guardian"
)

// TestSkillHooks: the skill lifecycle hooks of the current ACS text. A
// load MUST be correlatable to a prior approved skillRegister for the same
// (skill_id, digest), and a denied skill MUST NOT load, whatever the
// policy says of the load; a load whose load_path shows a skill loading
// another outside its declared composed_skills is denied. The
// registrations are rebuilt from the ledger after a restart.
func TestSkillHooks(t *testing.T) {
	denyRegistration := &guardian.TestPolicy{Rules: []guardian.TestRule{{ID: "no-skills", Method: guardian.MethodSkillRegister,
		Decision: guardian.Decision{Disposition: guardian.Deny, Reasoning: "unvetted publisher"}}}}
	e := newResumeEnv(t, "sqlite", nil)
	load := func(payload map[string]any, want string, code string) {
		t.Helper()
		r := e.send(t, guardian.MethodSkillLoad, payload)
		if r.decision() != want || (code != "" && !slices.Contains(r.reasonCodes(), code)) {
			t.Fatalf("skillLoad %v: %s, want %s %s", payload["skill_id"], r.raw, want, code)
		}
	}
	register := func(payload map[string]any, want string) {
		t.Helper()
		if r := e.send(t, guardian.MethodSkillRegister, payload); r.decision() != want {
			t.Fatalf("skillRegister %v: %s, want %s", payload["skill_id"], r.raw, want)
		}
	}

	load(skillLoad("report", "ab", "report"), "deny", "skill_not_registered")
	register(skillRegister("report", "ab", []string{"chart"}), "allow")
	load(skillLoad("report", "ab", "report"), "allow", "")
	load(skillLoad("report", "cd", "report"), "deny", "skill_digest_mismatch")

	// Composition: report declares chart, not mail.
	register(skillRegister("chart", "ef", nil), "allow")
	register(skillRegister("mail", "12", nil), "allow")
	load(skillLoad("chart", "ef", "report", "chart"), "allow", "")
	load(skillLoad("mail", "12", "report", "mail"), "deny", "skill_composition_undeclared")

	// A denied registration: the skill does not become eligible to load,
	// though the policy allows loads.
	e.s.cfg.Policy = denyRegistration
	losses[0].lose(t, e) // restart: a new Guardian with the new policy, same ledger
	register(skillRegister("shady", "34", nil), "deny")
	load(skillLoad("shady", "34", "shady"), "deny", "skill_registration_denied")

	// After the restart the approved registrations still hold.
	load(skillLoad("report", "ab", "report"), "allow", "")
	load(skillLoad("chart", "ef", "report", "chart"), "allow", "")
	if r := e.send(t, guardian.MethodSkillUnload, map[string]any{"skill_id": "report", "reason": "explicit_unload"}); r.decision() != "allow" {
		t.Fatalf("skillUnload: %s", r.raw)
	}
	// And after another, the denied one stays denied.
	losses[0].lose(t, e)
	load(skillLoad("shady", "34", "shady"), "deny", "skill_registration_denied")

	t.Run("payloads are checked", func(t *testing.T) {
		bad := skillLoad("report", "ab", "report")
		delete(bad, "digest")
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodSkillLoad, bad, nil))), -32602, "invalid_params", "params.payload.digest")
		reg := skillRegister("x", "ab", nil)
		delete(reg, "registration_provenance")
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodSkillRegister, reg, nil))), -32602, "invalid_params", "registration_provenance")
		mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodSkillUnload, map[string]any{"skill_id": "x", "reason": "bored"}, nil))), -32602, "invalid_params", "params.payload.reason")
	})
}
