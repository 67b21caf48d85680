package guardian

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// The skill lifecycle hooks of the current ACS text (hooks: skillRegister,
// skillLoad, skillUnload), beyond the seed's sixteen.
const (
	MethodSkillRegister = "steps/skillRegister"
	MethodSkillLoad     = "steps/skillLoad"
	MethodSkillUnload   = "steps/skillUnload"
)

// Reason codes of the skill rules.
const (
	// ReasonSkillNotRegistered: a skillLoad no approved skillRegister of
	// the same skill_id in the session precedes.
	ReasonSkillNotRegistered = "skill_not_registered"
	// ReasonSkillRegistrationDenied: the skill's registration was denied;
	// a denied skill MUST NOT become eligible to load.
	ReasonSkillRegistrationDenied = "skill_registration_denied"
	// ReasonSkillDigestMismatch: the loaded digest is not the one vetted
	// at skillRegister.
	ReasonSkillDigestMismatch = "skill_digest_mismatch"
	// ReasonSkillCompositionUndeclared: load_path shows a skill loading
	// another outside its declared composed_skills.
	ReasonSkillCompositionUndeclared = "skill_composition_undeclared"
)

// skillDigest is a digest object {algorithm, value}.
type skillDigest struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

// skillRegisterPayload is what the Guardian reads of a skillRegister.
type skillRegisterPayload struct {
	SkillID    string `json:"skill_id"`
	Definition *struct {
		Ref    string       `json:"ref"`
		Digest *skillDigest `json:"digest"`
	} `json:"definition"`
	DeclaredCapabilities []string        `json:"declared_capabilities"`
	RegistrationProv     json.RawMessage `json:"registration_provenance"`
	Composition          struct {
		ComposedSkills []string `json:"composed_skills"`
	} `json:"composition"`
}

// skillLoadPayload is what the Guardian reads of a skillLoad.
type skillLoadPayload struct {
	SkillID     string       `json:"skill_id"`
	Digest      *skillDigest `json:"digest"`
	LoadTrigger string       `json:"load_trigger"`
	LoadPath    []struct {
		SkillID string `json:"skill_id"`
	} `json:"load_path"`
}

// skillUnloadPayload is what the Guardian reads of a skillUnload.
type skillUnloadPayload struct {
	SkillID string `json:"skill_id"`
	Reason  string `json:"reason"`
}

// skillRegistration is the session's record of one skill's latest
// registration decision.
type skillRegistration struct {
	approved bool
	digest   skillDigest
	composed []string
}

// checkSkillPayload refuses (-32602) a skill hook's payload that lacks
// what the hook requires. The published schemas do not include the skill
// hooks yet, so the Guardian checks the members its rules read.
func checkSkillPayload(method string, payload json.RawMessage) *rpcerr.Error {
	switch method {
	case MethodSkillRegister:
		return checkSkill[skillRegisterPayload](payload, "skillRegister")
	case MethodSkillLoad:
		return checkSkill[skillLoadPayload](payload, "skillLoad")
	case MethodSkillUnload:
		return checkSkill[skillUnloadPayload](payload, "skillUnload")
	}
	return nil
}

// skillPayload is a skill hook's payload as the Guardian reads it: every
// one names its skill, and each lacks what its own hook requires in its
// own way.
type skillPayload interface {
	skillID() string
	// missing refuses what the payload lacks beside its skill_id.
	missing() *rpcerr.Error
}

// checkSkill decodes payload as a P (the named hook's payload) and refuses it
// when it is not one, names no skill or lacks what P's hook requires.
func checkSkill[P skillPayload](payload json.RawMessage, name string) *rpcerr.Error {
	var p P
	if err := json.Unmarshal(payload, &p); err != nil {
		return invalidParam("params.payload", "is not a "+name+" payload: "+err.Error())
	}
	if p.skillID() == "" {
		return invalidParam("params.payload.skill_id", "is required")
	}
	return p.missing()
}

func (p skillRegisterPayload) skillID() string { return p.SkillID }
func (p skillLoadPayload) skillID() string     { return p.SkillID }
func (p skillUnloadPayload) skillID() string   { return p.SkillID }

func (p skillRegisterPayload) missing() *rpcerr.Error {
	switch {
	case p.Definition == nil || p.Definition.Ref == "":
		return invalidParam("params.payload.definition.ref", "is required")
	case p.Definition.Digest == nil || p.Definition.Digest.Algorithm == "" || p.Definition.Digest.Value == "":
		return invalidParam("params.payload.definition.digest", "must be {algorithm, value}")
	case p.DeclaredCapabilities == nil:
		return invalidParam("params.payload.declared_capabilities", "is required")
	case len(p.RegistrationProv) == 0:
		return invalidParam("params.payload.registration_provenance", "is required")
	}
	return nil
}

func (p skillLoadPayload) missing() *rpcerr.Error {
	switch {
	case p.Digest == nil || p.Digest.Algorithm == "" || p.Digest.Value == "":
		return invalidParam("params.payload.digest", "must be {algorithm, value}")
	case !slices.Contains([]string{"user", "agent_decision", "skill_composition", "system"}, p.LoadTrigger):
		return invalidParam("params.payload.load_trigger", "must be user, agent_decision, skill_composition or system")
	case len(p.LoadPath) == 0:
		return invalidParam("params.payload.load_path", "must list at least the loaded skill")
	}
	return nil
}

func (p skillUnloadPayload) missing() *rpcerr.Error {
	if !slices.Contains([]string{"session_end", "explicit_unload", "replaced", "error"}, p.Reason) {
		return invalidParam("params.payload.reason", "must be session_end, explicit_unload, replaced or error")
	}
	return nil
}

// enforceSkillLoad applies the skillLoad rules to the decision about to be
// sent: a load MUST be correlatable to a prior approved skillRegister for
// the same (skill_id, digest), and a denied skill MUST NOT load; a load
// whose load_path has a skill loading another outside its declared
// composed_skills is denied too (SHOULD). The Guardian checks the binding
// itself, whatever digest_verified the framework claims. Any decision but
// DENY becomes DENY when a rule fails; the policy's codes are kept.
func (s *session) enforceSkillLoad(payload json.RawMessage, d Decision) Decision {
	var p skillLoadPayload
	if json.Unmarshal(payload, &p) != nil || p.Digest == nil {
		return d
	}
	code, why := "", ""
	reg, ok := s.skills[p.SkillID]
	switch {
	case !ok:
		code, why = ReasonSkillNotRegistered, fmt.Sprintf("skill %q has no registration in this session, so its load cannot be tied to an approved skillRegister", p.SkillID)
	case !reg.approved:
		code, why = ReasonSkillRegistrationDenied, fmt.Sprintf("the registration of skill %q was denied; a denied skill must not load", p.SkillID)
	case reg.digest != *p.Digest:
		code, why = ReasonSkillDigestMismatch, fmt.Sprintf("skill %q is loaded with digest %s:%s, but the approved registration vetted %s:%s", p.SkillID, p.Digest.Algorithm, p.Digest.Value, reg.digest.Algorithm, reg.digest.Value)
	default:
		for i := 1; i < len(p.LoadPath); i++ {
			parent, child := p.LoadPath[i-1].SkillID, p.LoadPath[i].SkillID
			if preg, ok := s.skills[parent]; !ok || !slices.Contains(preg.composed, child) {
				code, why = ReasonSkillCompositionUndeclared, fmt.Sprintf("load_path has skill %q loading %q, which is not among its declared composed_skills", parent, child)
				break
			}
		}
	}
	if code == "" {
		return d
	}
	return Decision{
		Disposition:      Deny,
		Reasoning:        "skillLoad denied: " + why,
		ReasonCodes:      uniqueCodes(append(d.ReasonCodes, code)),
		PolicyReferences: d.PolicyReferences,
		Cache:            d.Cache,
		EvaluatorVersion: d.EvaluatorVersion,
	}
}

// commitSkill records a committed skillRegister's decision (live or read
// back from the ledger on resume). A registration is approved when it was
// allowed (skillRegister's decisions are ALLOW and DENY); any other
// decision leaves the skill ineligible. A
// later registration of the same skill replaces the earlier one.
func (s *session) commitSkill(method string, payload json.RawMessage, d Disposition) {
	if method != MethodSkillRegister {
		return
	}
	var p skillRegisterPayload
	if json.Unmarshal(payload, &p) != nil || p.Definition == nil || p.Definition.Digest == nil {
		return
	}
	if s.skills == nil {
		s.skills = map[string]skillRegistration{}
	}
	s.skills[p.SkillID] = skillRegistration{
		approved: d == Allow,
		digest:   *p.Definition.Digest,
		composed: p.Composition.ComposedSkills,
	}
}
