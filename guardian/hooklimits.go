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
)

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
//   - Hooks, postCompact: "MAY NOT return DENY". Any DENY, ASK or DEFER
//     there, the Guardian's own (chain_mismatch, deferral_limit,
//     policy_failure) included, becomes ALLOW with the original reason
//     codes kept, and the decision that could not be sent is an audit
//     event.
func (g *Guardian) limitDecision(method string, d Decision, modifyCapable bool) (Decision, []string) {
	var events []string
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
