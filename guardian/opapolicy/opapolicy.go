// Package opapolicy plugs the OPA/Rego policy engine of guardian/policy into
// the Guardian: it implements guardian.Policy by translating the Guardian's
// Input into the engine's ([BuildInput]) and the engine's Decision back. It
// lives apart from package guardian so that the Guardian does not depend on
// OPA.
package opapolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/policy"
)

// Policy is a guardian.Policy backed by a policy.Engine.
type Policy struct {
	engine *policy.Engine
	// AskFallback is what an ASK becomes for a client that cannot route it
	// (ACS §9.2): guardian.Defer or guardian.Deny (the zero value).
	AskFallback guardian.Disposition
}

var _ guardian.Policy = (*Policy)(nil)

// New returns a Policy deciding with e.
func New(e *policy.Engine) *Policy { return &Policy{engine: e} }

// Decide implements guardian.Policy.
func (p *Policy) Decide(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	pin, err := BuildInput(in)
	if err != nil {
		return guardian.Decision{}, err
	}
	d, err := p.engine.Decide(ctx, pin)
	if err != nil {
		return guardian.Decision{}, err
	}
	return p.decision(d)
}

// BuildInput builds the engine's input from the Guardian's view of a step.
// It is the one builder of the policy input: Decide calls it for a live
// decision and guardian/replay for a recorded one, after rebuilding the
// Guardian's Input from the ledger, so that what a replay evaluates cannot
// drift from what the Guardian evaluated (TestReplayInputIsLiveInput).
// Capabilities granted for this request only (§9.1 scope this_request) are
// part of the Intent the engine sees for this step. Provenance objects that
// do not decode are left out, as the Guardian keeps any object with a
// string provenance_id.
func BuildInput(in guardian.Input) (*policy.Input, error) {
	approverCapable := in.Session.ApproverCapable
	out := &policy.Input{
		Method:      in.Method,
		Params:      in.Params,
		ParamsValue: in.ParamsValue,
		Session: policy.Session{
			SessionID:       in.SessionID,
			AgentID:         in.AgentID,
			Position:        in.Session.Length,
			ChainHash:       in.Session.ChainHash,
			Deferrals:       in.Session.Deferrals,
			ApproverCapable: &approverCapable,
		},
	}
	if in.Intent != nil || len(in.Grants) > 0 {
		pi := &policy.Intent{}
		if in.Intent != nil {
			pi.Raw, pi.ScopeMode = in.Intent.Raw, in.Intent.ScopeMode
			pi.Parsed = append(pi.Parsed, in.Intent.Parsed...)
			if len(in.Intent.ParserProvenance) > 0 {
				var pp policy.Provenance
				if err := json.Unmarshal(in.Intent.ParserProvenance, &pp); err != nil {
					return nil, fmt.Errorf("intent parser_provenance: %w", err)
				}
				pi.ParserProvenance = &pp
			}
		}
		pi.Parsed = append(pi.Parsed, in.Grants...)
		out.Intent = pi
	}
	out.Provenance = decoded.provenance(in.Provenance)
	return out, nil
}

// decoded caches decoded provenance objects by their bytes. The Guardian
// hands over the objects of earlier steps in a step's lineage, and later
// steps of a session reach the same objects again, so each is decoded once
// rather than on every step that reaches it.
var decoded = provenanceCache{m: map[string]policy.Provenance{}}

// maxCachedProvenance bounds the cache; when full it starts again empty.
const maxCachedProvenance = 1 << 16

type provenanceCache struct {
	mu sync.Mutex
	m  map[string]policy.Provenance
}

func (c *provenanceCache) provenance(raws []json.RawMessage) []policy.Provenance {
	if len(raws) == 0 {
		return nil
	}
	out := make([]policy.Provenance, 0, len(raws))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, raw := range raws {
		if pv, ok := c.m[string(raw)]; ok {
			out = append(out, pv)
			continue
		}
		var pv policy.Provenance
		if err := json.Unmarshal(raw, &pv); err != nil {
			// The Guardian keeps objects with a string provenance_id; a
			// malformed rest is left out rather than failing the step.
			continue
		}
		if len(c.m) >= maxCachedProvenance {
			clear(c.m)
		}
		c.m[string(raw)] = pv
		out = append(out, pv)
	}
	return out
}

// evaluatorVersion is a result's metadata.evaluator_version (ACS §6.1,
// docs/policy.md): the engine on its OPA version, then the policy bundle
// that decided as "<policy_id>@<policy_version>". The engine names its
// bundle in every decision's first policy reference.
func evaluatorVersion(refs []acs.PolicyReference) string {
	if len(refs) == 0 {
		return policy.EvaluatorVersion()
	}
	return policy.EvaluatorVersion() + " " + refs[0].PolicyID + "@" + refs[0].PolicyVersion
}

// decision is the engine's verdict as the Guardian's: the ACS result
// members are acs types on both sides.
func (p *Policy) decision(d *policy.Decision) (guardian.Decision, error) {
	out := guardian.Decision{
		Disposition:        d.Disposition,
		Reasoning:          d.Reasoning,
		ReasonCodes:        d.ReasonCodes,
		PolicyReferences:   d.PolicyReferences,
		PolicyData:         d.PolicyData,
		CitedProvenanceIDs: d.CitedProvenanceIDs,
		Modifications:      d.Modifications,
		Ask:                d.AskDetails,
		Defer:              d.DeferDetails,
		AskFallback:        p.AskFallback,
		EvaluatorVersion:   evaluatorVersion(d.PolicyReferences),
	}
	if len(d.NDBuiltinCache) > 0 {
		if !json.Valid(d.NDBuiltinCache) {
			return guardian.Decision{}, fmt.Errorf("policy engine returned a non-deterministic built-in cache that is not JSON")
		}
		out.Cache = json.RawMessage(d.NDBuiltinCache)
	}
	return out, nil
}
