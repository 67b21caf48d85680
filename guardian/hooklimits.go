package guardian

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reason codes and audit events of the per-hook disposition limits.
const (
	// ReasonModifyUnsupported is ACS §17.2's registered code for a MODIFY
	// the client cannot apply (§6.5).
	ReasonModifyUnsupported = "modify_unsupported"
	// ReasonPostCompactNotDenied marks a postCompact answer that is ALLOW
	// because DENY, ASK and DEFER are not legal there (hooks: postCompact
	// is not decision-eligible; compaction has already happened).
	ReasonPostCompactNotDenied = "post_compact_not_denied"
	// ReasonDispositionNotAllowed marks an answer the policy (or the
	// Guardian) reached that the hook may not carry (hookDispositions):
	// it is replaced, and the replacement is an audit event of the same
	// name.
	ReasonDispositionNotAllowed = "disposition_not_allowed"
)

// hookRule is what one hook may answer: the dispositions it may carry,
// whether it is decision-eligible (an answer outside the set becomes DENY,
// failing closed, when it is; ALLOW when the step has already happened and
// cannot be blocked), and where the text says so.
type hookRule struct {
	allowed  []Disposition
	eligible bool
	section  string
}

var (
	allFive   = []Disposition{Allow, Deny, Modify, Ask, Defer}
	allowDeny = []Disposition{Allow, Deny}
	withEdit  = []Disposition{Allow, Deny, Modify}
	auditOnly = []Disposition{Allow}
)

// hookDispositions is, per method, the dispositions the newest ACS text
// lets it carry (docs/spec/instrument/hooks.md, one "Decision" line per
// hook). "Decision-eligible" with no list is the full vocabulary of §6;
// audit-only hooks answer ALLOW. Methods not listed (protocols/MCP/* and
// wrapped:mcp-*) take "the standard ACS ... decision contract"
// (hooks.md, protocols/MCP/*): the full vocabulary.
var hookDispositions = map[string]hookRule{
	"steps/sessionStart":           {allowDeny, true, "hooks.md sessionStart: ALLOW / DENY"},
	"steps/agentTrigger":           {withEdit, true, "hooks.md agentTrigger: ALLOW / DENY / MODIFY"},
	"steps/turnStart":              {allFive, true, "hooks.md turnStart: decision-eligible"},
	"steps/userMessage":            {withEdit, true, "hooks.md userMessage: ALLOW / DENY / MODIFY"},
	"steps/agentResponse":          {withEdit, true, "hooks.md agentResponse: ALLOW / DENY / MODIFY"},
	"steps/knowledgeRetrieval":     {withEdit, true, "hooks.md knowledgeRetrieval: ALLOW / DENY / MODIFY"},
	"steps/memoryContextRetrieval": {withEdit, true, "hooks.md memoryContextRetrieval: ALLOW / DENY / MODIFY"},
	"steps/memoryStore":            {withEdit, true, "hooks.md memoryStore: ALLOW / DENY / MODIFY"},
	"steps/toolCallRequest":        {allFive, true, "hooks.md toolCallRequest: ALLOW / DENY / MODIFY / ASK / DEFER"},
	"steps/toolCallResult":         {withEdit, true, "hooks.md toolCallResult: ALLOW / DENY / MODIFY"},
	"steps/preCompact":             {allFive, true, "hooks.md preCompact: decision-eligible"},
	MethodPostCompact:              {[]Disposition{Allow, Modify}, false, "hooks.md postCompact: MAY return MODIFY, MAY NOT return DENY"},
	"steps/subagentStart":          {allFive, true, "hooks.md subagentStart: decision-eligible"},
	"steps/subagentStop":           {auditOnly, false, "hooks.md subagentStop: audit only"},
	MethodSkillRegister:            {allowDeny, true, "hooks.md skillRegister: ALLOW / DENY"},
	MethodSkillLoad:                {allowDeny, true, "hooks.md skillLoad: ALLOW / DENY"},
	MethodSkillUnload:              {auditOnly, false, "hooks.md skillUnload: audit only"},
	"steps/turnEnd":                {auditOnly, false, "hooks.md turnEnd: not decision-eligible"},
	MethodSessionEnd:               {auditOnly, false, "hooks.md sessionEnd: audit only"},
	MethodAgbomSnapshot:            {allowDeny, true, "hooks.md agbom/snapshot: normally ALLOW, MAY DENY"},
	MethodAgbomChanged:             {allowDeny, true, "hooks.md agbom/changed: ALLOW / DENY"},
}

// mcpRule is the rule of protocols/MCP/* and wrapped:mcp-*/... methods.
var mcpRule = hookRule{allFive, true, "hooks.md protocols/MCP/*: the standard decision contract"}

// ruleFor returns the hook rule of method.
func ruleFor(method string) hookRule {
	if r, ok := hookDispositions[method]; ok {
		return r
	}
	return mcpRule
}

// AllowedDispositions returns the dispositions method may carry and the
// place in the ACS text that says so.
func AllowedDispositions(method string) ([]Disposition, string) {
	r := ruleFor(method)
	return slices.Clone(r.allowed), r.section
}

// MethodPostCompact is the hook whose only legal answers are ALLOW and
// MODIFY.
const MethodPostCompact = "steps/postCompact"

// limitDecision applies what a hook and the client allow to the decision
// the Guardian is about to send, and returns it with the audit events the
// entry must record:
//
//   - ACS §6.5: a client that cannot apply MODIFY gets DENY with reason
//     code modify_unsupported and reasoning naming the modification, and
//     the substitution is an audit event; at postCompact it gets ALLOW
//     instead, with the same code and event.
//   - Hooks, the disposition table (hookDispositions): a decision the
//     hook may not carry, the Guardian's own (chain_mismatch,
//     deferral_limit, policy_failure) included, is replaced with the
//     original reason codes kept and the decision that could not be sent
//     recorded as an audit event. At postCompact ("MAY NOT return DENY")
//     DENY, ASK and DEFER become ALLOW with post_compact_not_denied; at
//     any other hook that is not decision-eligible the answer becomes
//     ALLOW, and at a decision-eligible one DENY, both with
//     disposition_not_allowed.
func (g *Guardian) limitDecision(method string, d Decision, modifyCapable bool) (Decision, []string) {
	var events []string
	rule := ruleFor(method)
	if method != MethodPostCompact && !slices.Contains(rule.allowed, d.Disposition) {
		was := d.Disposition
		d.Modifications, d.Ask, d.Defer = nil, nil, nil
		d.ReasonCodes = uniqueCodes(append(d.ReasonCodes, ReasonDispositionNotAllowed))
		events = append(events, ReasonDispositionNotAllowed)
		d.Disposition = Deny
		if !rule.eligible {
			d.Disposition = Allow
		}
		d.Reasoning = fmt.Sprintf("%s may carry only %s (%s), so the decision %s is sent as %s and recorded; it was: %s",
			method, dispositionList(rule.allowed), rule.section, was, d.Disposition, d.Reasoning)
		return d, events
	}
	if d.Disposition == Modify && !modifyCapable {
		what := describeModifications(d)
		d.Modifications = nil
		d.ReasonCodes = uniqueCodes(append(d.ReasonCodes, ReasonModifyUnsupported))
		events = append(events, ReasonModifyUnsupported)
		if method == MethodPostCompact {
			d.Disposition = Allow
			d.Reasoning = fmt.Sprintf("%s; the Guardian would rewrite the summary (%s), but this client cannot apply MODIFY, so the original summary stands (ACS §6.5, postCompact exception)", d.Reasoning, what)
			return d, events
		}
		d.Disposition = Deny
		d.Reasoning = fmt.Sprintf("%s; the Guardian would modify the request (%s), but this client cannot apply MODIFY, so it is denied (ACS §6.5)", d.Reasoning, what)
		return d, events
	}
	if method == MethodPostCompact && (d.Disposition == Deny || d.Disposition == Ask || d.Disposition == Defer) {
		events = append(events, "post_compact_"+string(d.Disposition)+"_not_sent")
		d.Reasoning = fmt.Sprintf("compaction has already happened and postCompact may not be denied, so it is allowed and recorded; the decision was %s: %s", d.Disposition, d.Reasoning)
		d.Disposition = Allow
		d.ReasonCodes = uniqueCodes(append(d.ReasonCodes, ReasonPostCompactNotDenied))
		d.Modifications, d.Ask, d.Defer = nil, nil, nil
	}
	return d, events
}

func dispositionList(ds []Disposition) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strings.ToUpper(string(d))
	}
	return strings.Join(parts, ", ")
}

// describeModifications names what a MODIFY would have changed, for the
// reasoning of its substitute.
func describeModifications(d Decision) string {
	m := d.Modifications
	if m == nil {
		return "no modification given"
	}
	var parts []string
	if m.ModifiedContent != nil {
		parts = append(parts, "replace the whole payload")
	}
	for _, r := range m.Redactions {
		parts = append(parts, "redact "+r.Path)
	}
	for _, k := range slices.Sorted(maps.Keys(m.ParameterOverrides)) {
		parts = append(parts, "override "+k)
	}
	return strings.Join(parts, ", ")
}

// askSubstitution returns the audit event that records a §9.2
// substitution of the policy's ASK, or "" when the ASK was sent (or was
// invalid, which is not a substitution).
func askSubstitution(policy, sent Decision) string {
	if policy.Disposition != Ask || sent.Disposition == Ask {
		return ""
	}
	switch {
	case slices.Contains(sent.ReasonCodes, ReasonApproverUnavailable):
		return ReasonApproverUnavailable
	case slices.Contains(sent.ReasonCodes, ReasonAskSubstituted):
		return ReasonAskSubstituted
	}
	return ""
}

// modifyCapable decides at handshake whether the session's client can
// apply MODIFY (§6.5): the deployment decides (Config.ModifyCapable, by
// the agent identity bound at handshake), and a client may declare that it
// cannot (ClientHello modify_supported: false). Either one saying no is
// enough: a declaration can only make the Guardian stricter.
func (g *Guardian) modifyCapable(agentID string, ch clientHello) bool {
	if ch.ModifySupported != nil && !*ch.ModifySupported {
		return false
	}
	return g.cfg.ModifyCapable == nil || g.cfg.ModifyCapable(agentID)
}
