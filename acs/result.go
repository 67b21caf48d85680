package acs

import "encoding/json"

// The decision members of an AcsResult (response-envelope.json $defs/AcsResult,
// ACS §6) are defined here once: the Guardian sends them, the policy engine
// produces them and replay compares them, all with these types, so the JSON
// a policy's verdict is written with cannot differ between the three.

// Disposition is an ACS verdict (ACS §6), the decision member of an
// AcsResult, spelled as on the wire.
type Disposition string

// The five dispositions of ACS §6.
const (
	Allow  Disposition = "allow"
	Deny   Disposition = "deny"
	Modify Disposition = "modify"
	Ask    Disposition = "ask"
	Defer  Disposition = "defer"
)

// Valid reports whether d is one of the five dispositions.
func (d Disposition) Valid() bool {
	switch d {
	case Allow, Deny, Modify, Ask, Defer:
		return true
	}
	return false
}

// DeferReasons are the DEFER reasons ACS §6 names (defer-details.json
// reason).
var DeferReasons = []string{"insufficient_context", "conflicting_policies", "low_confidence", "pending_dependency"}

// PolicyReference is one item of policy_references (ACS §6.1): a rule that
// contributed to a decision. The schema requires none of its members.
// policy_version should name a bundle version the ledger holds, so that
// replay can find it.
type PolicyReference struct {
	PolicyID      string `json:"policy_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	PolicyName    string `json:"policy_name,omitempty"`
	RuleID        string `json:"rule_id,omitempty"`
}

// Modifications is the MODIFY payload (modifications.json). ACS §6.3: it is
// either a wholesale replacement (ModifiedContent alone) or structured edits
// (Redactions and ParameterOverrides on disjoint targets).
type Modifications struct {
	ModifiedContent    *string                    `json:"modified_content,omitempty"`
	Redactions         []Redaction                `json:"redactions,omitempty"`
	ParameterOverrides map[string]json.RawMessage `json:"parameter_overrides,omitempty"`
}

// Redaction blanks one string addressed by a JSON Pointer (RFC 6901) into
// the request's params, e.g. /payload/arguments/command/value.
type Redaction struct {
	Path string `json:"path"`
	// Replacement is the text put in place; nil means the agent's default
	// ("[REDACTED]" per modifications.json).
	Replacement *string `json:"replacement,omitempty"`
}

// AskDetails is the ASK payload (ACS §9, ask-details.json): who must
// approve, and why. The spec fixes only approver; Prompt and
// RequestedCapabilities are acsledger's members.
type AskDetails struct {
	Approver Approver `json:"approver"`
	// Prompt is what the approver is asked, for display.
	Prompt string `json:"prompt,omitempty"`
	// RequestedCapabilities are the capabilities outside Intent.parsed
	// that an approver may grant through an intent extension (§9.1).
	RequestedCapabilities []string `json:"requested_capabilities,omitempty"`
}

// Approver is ask_details.approver of ACS §9: {type, id, endpoint}, type and
// id required.
type Approver struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Endpoint string `json:"endpoint,omitempty"`
}

// DeferDetails is the DEFER payload (ACS §6, defer-details.json): why, how
// it resolves, and the verdict that applies when it does not resolve in
// time.
type DeferDetails struct {
	// Reason is one of DeferReasons; the schema does not require it.
	Reason              string `json:"reason,omitempty"`
	ResolutionMethod    string `json:"resolution_method"`
	ResolutionTimeoutMS int64  `json:"resolution_timeout_ms"`
	// TimeoutDecision is allow or deny, deny by default (ACS §6).
	TimeoutDecision Disposition `json:"timeout_decision"`
}
