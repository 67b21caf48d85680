package guardian

import (
	"context"
	"encoding/json"

	"github.com/acsledger/acsledger/acs"
)

// Policy is the deterministic decision layer (ACS §12.1) the Guardian asks
// about every content-bearing step. The Guardian owns this interface; the
// OPA/Rego evaluator of guardian/policy implements it (and a first-match
// rule table in this package's tests).
//
// Decide must be a function of its Input and the policy's own versioned
// state, except for what it records in Decision.Cache (for example the
// results of non-deterministic built-ins such as time.now_ns), so that a
// replay with the recorded cache and the cited policy versions reaches the
// same decision. An error is a decision failure (ACS §6.4): the Guardian
// answers with the negotiated failure posture, never with an allow.
//
// Decide is called with the session's lock held; it must not call back into
// the Guardian.
type Policy interface {
	Decide(ctx context.Context, in Input) (Decision, error)
}

// Input is what the policy sees of one step (ACS §12.1: request envelope,
// SessionContext, Intent).
type Input struct {
	// Method is the JSON-RPC method, e.g. "steps/toolCallRequest" or
	// "protocols/MCP/tools/call".
	Method    string
	SessionID string
	AgentID   string
	RequestID string
	// TurnID is metadata.turn_id, "" when absent.
	TurnID string
	// Params is the request's params exactly as received, signature
	// included; Payload is params.payload.
	Params  json.RawMessage
	Payload json.RawMessage
	// ParamsValue is Params decoded (maps, slices, strings, bools, nil and
	// json.Number), or nil when the caller has only the bytes. A policy
	// may read it instead of decoding Params again; nobody modifies it.
	ParamsValue map[string]any
	// Intent is the session's Intent (§8.4) as it stands before this step,
	// nil when none was established.
	Intent *Intent
	// Grants are capabilities an approver granted for this request only
	// (§9.1 scope this_request).
	Grants []string
	// Provenance holds the provenance objects (ACS §7) of the session's
	// earlier steps in this step's lineage (ProvenanceLog.Lineage), first
	// seen first, so a policy can follow derived_from from this step's
	// provenance to its sources. Objects of the session that no lineage of
	// this step reaches are left out: they cannot change where it leads,
	// and handing over the whole log made a step's cost grow with the
	// session.
	Provenance []json.RawMessage
	// Session is the Guardian's view of the session before this step.
	Session SessionState
}

// SessionState is the part of the SessionContext (ACS §8) a policy may key on.
type SessionState struct {
	// ChainHash is the chain head before this step, "" for a new chain.
	ChainHash string
	// Length is the number of entries in the chain.
	Length int64
	// Deferrals is how many DEFER decisions the session has had.
	Deferrals int
	// ApproverCapable reports whether the client can route ASK (§9.2).
	ApproverCapable bool
}

// Disposition is one of the five verdicts of ACS §6; the type is acs's.
type Disposition = acs.Disposition

// The dispositions of ACS §6, spelled as on the wire.
const (
	Allow  = acs.Allow
	Deny   = acs.Deny
	Modify = acs.Modify
	Ask    = acs.Ask
	Defer  = acs.Defer
)

// Decision is a policy's verdict on one step. The Guardian checks it
// (required fields, §6.3 composition), may substitute it (§9.2 ASK for an
// approver-incapable client, the cascading-deferral bound), records it in the
// step's ContextEntry and sends it.
type Decision struct {
	Disposition Disposition
	Reasoning   string
	ReasonCodes []string
	// PolicyReferences are the rules that fired; policy_version should
	// name a bundle version recorded with ledger.PolicyBundleStore.PutPolicyBundle
	// so that replay can find it.
	PolicyReferences   []acs.PolicyReference
	PolicyData         json.RawMessage
	CitedProvenanceIDs []string

	Modifications *acs.Modifications
	Ask           *acs.AskDetails
	Defer         *acs.DeferDetails

	// AskFallback is what to send instead of ASK when the client cannot
	// resolve ASK (§9.2): Defer (recoverable) or Deny (no recovery path).
	// The zero value means Deny.
	AskFallback Disposition

	// Cache is an opaque JSON value the policy needs to replay this decision
	// exactly (non-deterministic built-in results). It is recorded in the
	// ContextEntry, never sent to the client.
	Cache json.RawMessage

	// EvaluatorVersion goes into the response's metadata.evaluator_version.
	EvaluatorVersion string
}
