package guardian

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acsledger/acsledger/acs"
)

// Reason codes the Guardian itself puts on decisions it makes or rewrites.
// They are part of the wire contract (docs/guardian.md) and never renamed.
const (
	ReasonChainMismatch       = "chain_mismatch"       // ACS §8.6
	ReasonApproverUnavailable = "approver_unavailable" // ACS §9.2
	ReasonAskSubstituted      = "ask_substituted"      // ACS §9.2, DEFER branch
	ReasonDeferralLimit       = "deferral_limit"       // ACS §6 cascading bound
	ReasonInvalidDecision     = "invalid_policy_decision"
	ReasonPolicyFailure       = "policy_failure"     // §6.4, posture deny
	ReasonLedgerUnavailable   = "ledger_unavailable" // §6.4, posture deny
	ReasonIntentImmutable     = "intent_modification_ignored"
)

// settle turns a policy's decision into the decision the Guardian sends,
// enforcing ACS §6 (required fields), §6.3 (MODIFY composition), §9.2 (no
// ASK to a client that cannot route it) and the per-session bound on
// cascading deferrals. A decision the Guardian may not send becomes a DENY
// that says why: failing closed is the only safe reading of a policy whose
// intent cannot be determined.
func (g *Guardian) settle(d Decision, st SessionState) Decision {
	d.ReasonCodes = uniqueCodes(d.ReasonCodes)
	switch d.Disposition {
	case Allow:
		d.Modifications, d.Ask, d.Defer = nil, nil, nil
	case Deny:
		d.Modifications, d.Ask, d.Defer = nil, nil, nil
		if d.Reasoning == "" {
			d.Reasoning = "denied by policy"
		}
	case Modify:
		d.Ask, d.Defer = nil, nil
		if err := checkModifications(d.Modifications); err != nil {
			return invalidDecision(d, fmt.Sprintf("policy returned a MODIFY the Guardian may not send (ACS §6.3): %v", err))
		}
		if d.Reasoning == "" {
			d.Reasoning = "modified by policy"
		}
	case Ask:
		d.Modifications, d.Defer = nil, nil
		if d.Ask == nil || d.Ask.Approver.Type == "" || d.Ask.Approver.ID == "" {
			return invalidDecision(d, "policy returned ASK without ask_details.approver type and id")
		}
		if !slices.Contains(g.cfg.ApproverTypes, d.Ask.Approver.Type) {
			return invalidDecision(d, fmt.Sprintf("policy returned ASK to approver type %q, which this Guardian does not route to", d.Ask.Approver.Type))
		}
		if d.Reasoning == "" {
			d.Reasoning = "approval required"
		}
		if !st.ApproverCapable {
			return g.substituteAsk(d, st)
		}
	case Defer:
		d.Modifications, d.Ask = nil, nil
		if err := g.completeDefer(&d); err != nil {
			return invalidDecision(d, err.Error())
		}
	default:
		return invalidDecision(d, fmt.Sprintf("policy returned unknown disposition %q", d.Disposition))
	}
	if d.Disposition == Defer && st.Deferrals >= g.cfg.MaxDeferrals {
		return Decision{
			Disposition:      Deny,
			Reasoning:        fmt.Sprintf("the session has reached its bound of %d deferred decisions; a further DEFER is denied (ACS §6: cascading deferrals are bounded per session)", g.cfg.MaxDeferrals),
			ReasonCodes:      uniqueCodes(append(d.ReasonCodes, ReasonDeferralLimit)),
			PolicyReferences: d.PolicyReferences,
			Cache:            d.Cache,
			EvaluatorVersion: d.EvaluatorVersion,
		}
	}
	return d
}

// substituteAsk applies ACS §9.2: a client that cannot resolve ASK gets a
// DEFER with timeout_decision deny, or a DENY with reason_codes
// ["approver_unavailable"], as the policy chose.
func (g *Guardian) substituteAsk(d Decision, st SessionState) Decision {
	out := Decision{
		PolicyReferences:   d.PolicyReferences,
		PolicyData:         d.PolicyData,
		CitedProvenanceIDs: d.CitedProvenanceIDs,
		Cache:              d.Cache,
		EvaluatorVersion:   d.EvaluatorVersion,
	}
	if d.AskFallback == Defer && st.Deferrals < g.cfg.MaxDeferrals {
		out.Disposition = Defer
		out.Reasoning = fmt.Sprintf("%s; this client cannot route an approval request, so the decision is deferred and denied if unresolved", d.Reasoning)
		out.ReasonCodes = uniqueCodes(append(d.ReasonCodes, ReasonAskSubstituted))
		out.Defer = &acs.DeferDetails{
			Reason:              "pending_dependency",
			ResolutionMethod:    "out_of_band_escalation",
			ResolutionTimeoutMS: g.cfg.DeferTimeout.Milliseconds(),
			TimeoutDecision:     Deny,
		}
		return out
	}
	out.Disposition = Deny
	out.Reasoning = fmt.Sprintf("%s; approval by a %s approver is required, but this client has no approver capability (it cannot route ASK, ACS §9.2)", d.Reasoning, d.Ask.Approver.Type)
	out.ReasonCodes = uniqueCodes(append(d.ReasonCodes, ReasonApproverUnavailable))
	return out
}

// completeDefer fills the DEFER fields a policy may leave to the Guardian
// and refuses values ACS §6 does not allow.
func (g *Guardian) completeDefer(d *Decision) error {
	if d.Defer == nil {
		d.Defer = &acs.DeferDetails{}
	}
	dd := d.Defer
	if dd.Reason == "" {
		dd.Reason = "insufficient_context"
	}
	if !slices.Contains(acs.DeferReasons, dd.Reason) {
		return fmt.Errorf("policy returned DEFER with reason %q, not one of %s", dd.Reason, strings.Join(acs.DeferReasons, ", "))
	}
	if dd.ResolutionMethod == "" {
		dd.ResolutionMethod = "retry"
	}
	if dd.ResolutionTimeoutMS <= 0 {
		dd.ResolutionTimeoutMS = g.cfg.DeferTimeout.Milliseconds()
	}
	switch dd.TimeoutDecision {
	case "":
		// ACS §6: timeout_decision defaults to deny.
		dd.TimeoutDecision = Deny
	case Deny, Allow:
	default:
		return fmt.Errorf("policy returned DEFER with timeout_decision %q, not allow or deny", dd.TimeoutDecision)
	}
	if d.Reasoning == "" {
		d.Reasoning = "decision deferred: " + dd.Reason
	}
	return nil
}

func invalidDecision(d Decision, why string) Decision {
	return Decision{
		Disposition:      Deny,
		Reasoning:        why,
		ReasonCodes:      uniqueCodes(append(d.ReasonCodes, ReasonInvalidDecision)),
		PolicyReferences: d.PolicyReferences,
		Cache:            d.Cache,
		EvaluatorVersion: d.EvaluatorVersion,
	}
}

func uniqueCodes(codes []string) []string {
	var out []string
	for _, c := range codes {
		if c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// checkModifications enforces ACS §6.3 on a modifications object: it is not
// empty; modified_content excludes every other edit; redaction paths are
// JSON Pointers; and no redaction addresses the same field as a
// parameter_overrides key, nor an ancestor or descendant of it.
//
// Redaction paths are JSON Pointers into the request's params, as the
// policy layer writes them (/payload/arguments/command/value). A
// parameter_overrides key that starts with "/" is such a pointer too; any
// other key names a tool argument and addresses /payload/arguments/<key>
// (docs/guardian.md, docs/policy.md).
func checkModifications(m *acs.Modifications) error {
	if m == nil || (m.ModifiedContent == nil && len(m.Redactions) == 0 && len(m.ParameterOverrides) == 0) {
		return fmt.Errorf("modifications is empty")
	}
	if m.ModifiedContent != nil {
		if len(m.Redactions) > 0 || len(m.ParameterOverrides) > 0 {
			return fmt.Errorf("modified_content replaces the whole payload and must not be combined with redactions or parameter_overrides")
		}
		return nil
	}
	redacted := make([][]string, len(m.Redactions))
	for i, r := range m.Redactions {
		toks, err := pointerTokens(r.Path)
		if err != nil {
			return fmt.Errorf("redactions[%d].path %q: %w", i, r.Path, err)
		}
		redacted[i] = toks
	}
	keys := make([]string, 0, len(m.ParameterOverrides))
	for k := range m.ParameterOverrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		target, err := overrideTarget(k)
		if err != nil {
			return fmt.Errorf("parameter_overrides key %q: %w", k, err)
		}
		for i, r := range redacted {
			if prefixOf(r, target) || prefixOf(target, r) {
				return fmt.Errorf("redactions[%d].path %q and parameter_overrides key %q address overlapping fields; their targets must be disjoint", i, m.Redactions[i].Path, k)
			}
		}
	}
	return nil
}

// overrideTarget returns the payload location a parameter_overrides key
// addresses, as JSON Pointer reference tokens.
func overrideTarget(key string) ([]string, error) {
	if strings.HasPrefix(key, "/") {
		return pointerTokens(key)
	}
	if key == "" {
		return nil, fmt.Errorf("empty argument name")
	}
	return []string{"payload", "arguments", key}, nil
}

// pointerTokens splits an RFC 6901 JSON Pointer into unescaped reference
// tokens. The empty pointer (all of params) is refused: replacing the whole
// payload is what modified_content is for.
func pointerTokens(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("the empty pointer addresses all of params; use modified_content")
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("a JSON Pointer starts with \"/\"")
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("\"~\" must be followed by 0 or 1 (RFC 6901)")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// prefixOf reports whether a is b or an ancestor of b.
func prefixOf(a, b []string) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}
