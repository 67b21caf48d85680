package guardian

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/acsledger/acsledger/acs"
)

// Step types of the entries the Guardian writes on an approver's
// resolution of an ASK rather than on an agent's request.
const (
	// StepIntentExtension records a grant (ACS §9.1).
	StepIntentExtension = "intent_extension"
	// StepAskResolution records a denial, or an allow that grants nothing.
	StepAskResolution = "ask_resolution"
)

// resolutionEntry is the ContextEntry of an approver's resolution. Like a
// step's entry it carries request_hash (ACS §8.1, ACS-Audit): the
// lowercase-hex SHA-256 of the RFC 8785 form of the approval document as
// received, its signature member included, which the entry also holds
// under approval, so that an auditor can recompute the hash and verify the
// approver's signature from the chain alone (docs/guardian.md, "Approvals").
type resolutionEntry struct {
	acs.EntryHead
	AskStepID string          `json:"ask_step_id"`
	Approver  acs.Approver    `json:"approver"`
	Approval  json.RawMessage `json:"approval"`
	// Grants only.
	Capabilities []string `json:"capabilities,omitempty"`
	Scope        string   `json:"scope,omitempty"`
	// ExtensionProvenance is the grant's provenance, distinct from
	// parser_provenance (§9.1.3).
	ExtensionProvenance *extensionProvenance `json:"extension_provenance,omitempty"`
}

type extensionProvenance struct {
	GrantedBy         acs.Approver `json:"granted_by"`
	AskStepID         string       `json:"ask_step_id"`
	ApprovalTimestamp string       `json:"approval_timestamp"`
}

// resolutionEntry builds the entry of approval a, whose RFC 8785 form is
// canon, and returns it both as resume reads it and as JSON.
func (g *Guardian) resolutionEntry(a Approval, canon []byte, granted bool) (storedEntry, []byte, error) {
	e := resolutionEntry{
		EntryHead: acs.EntryHead{
			EntryID:     acs.NewUUID(),
			StepID:      acs.NewUUID(),
			StepType:    StepAskResolution,
			Timestamp:   g.cfg.Clock().UTC().Format(timeFormat),
			RequestHash: acs.Hash(sha256.Sum256(canon)).String(),
		},
		AskStepID: a.AskStepID,
		Approver:  a.Approver,
		Approval:  canon,
	}
	if granted {
		e.StepType = StepIntentExtension
		e.Capabilities = a.IntentExtension.Capabilities
		e.Scope = a.IntentExtension.Scope
		e.ExtensionProvenance = &extensionProvenance{GrantedBy: a.Approver, AskStepID: a.AskStepID, ApprovalTimestamp: a.Timestamp}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return storedEntry{}, nil, fmt.Errorf("couldn't encode the resolution of ASK %s: %w", a.AskStepID, err)
	}
	se := storedEntry{
		StepType: e.StepType, StepID: e.StepID, RequestHash: e.RequestHash,
		AskStepID: e.AskStepID, Approver: e.Approver, Capabilities: e.Capabilities, Scope: e.Scope,
	}
	return se, b, nil
}

// knownToAgent reports whether h is the head last published to the
// session's agent. An agent that cross-checks its head (ACS §8.6) sends
// the last chain_hash it was given; entries the Guardian wrote on its own
// since then (approver resolutions) are not a divergence, so that head is
// accepted as well as the current one.
func (s *session) knownToAgent(h string) bool {
	return s.agentHead != nil && s.agentHead.String() == h
}

// headAfterGrants returns the head a step's entry was chained onto, prev,
// when it is not the head last published to the agent (Guardian-written
// entries lie in between), and "" otherwise. The step's signed response
// carries it as previous_chain_hash, so the agent learns, under the
// Guardian's signature, how its last head led to the new one.
func (s *session) headAfterGrants(prev *acs.Hash) string {
	if prev == nil || (s.agentHead != nil && *s.agentHead == *prev) {
		return ""
	}
	return prev.String()
}
