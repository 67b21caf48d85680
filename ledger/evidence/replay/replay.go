// Package replay re-evaluates a recorded Guardian decision (docs/policy.md,
// "Replay"): the same request under the policy bundle version the decision
// cites, with the non-deterministic built-in results recorded beside it, to
// answer "why was this allowed?" and, under another recorded version,
// "would that policy have decided otherwise?".
//
// What the ledger holds and what it does not: a ContextEntry records the
// step's method, its position and previous head, the request's request_hash,
// the Intent it established, this-request grants, the decision with its
// policy_references and nd_builtin_cache; the signed response records the
// full verdict (modifications, ask and defer details, policy_data, cited
// provenance). The request's params are NOT stored (only their hash), nor
// the payloads of earlier steps from which the Guardian collects provenance.
// So a replay needs the caller to supply the params, which are checked
// against the recorded request_hash (ACS §8.1) before anything is
// evaluated; provenance may be supplied too, and is otherwise empty and
// listed in Result.NotReconstructed.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
)

// Errors a caller maps to its own (one switch in web, exit codes in cmd).
var (
	// ErrParamsRequired: the request did not carry the recorded request's
	// params, which the ledger does not store.
	ErrParamsRequired = errors.New("the request's params are required: the ledger stores only their request_hash")
	// ErrParamsMismatch: the supplied params do not hash to the entry's
	// request_hash, so they are not the request that was decided.
	ErrParamsMismatch = errors.New("the supplied params are not the recorded request")
	// ErrNotPolicyDecision: the recorded decision cites no policy bundle
	// (the Guardian decided on its own: chain_mismatch, policy_failure...),
	// so there is nothing to replay.
	ErrNotPolicyDecision = errors.New("the recorded decision cites no policy bundle")
	// ErrAmbiguous: the request_id is the step_id of entries in more than
	// one session; name the session.
	ErrAmbiguous = errors.New("the request_id names steps in more than one session")
	// ErrBadRequest: the replay request itself is malformed.
	ErrBadRequest = errors.New("bad replay request")
)

// Request asks for one replay.
type Request struct {
	RequestID string
	// SessionID narrows the lookup to one session (cheap); "" scans every
	// session (see FindEntry).
	SessionID string
	// Params are the recorded request's params exactly as sent, signature
	// included. Required.
	Params json.RawMessage
	// Provenance optionally supplies the provenance objects of the
	// session's earlier steps, which the ledger does not store.
	Provenance []policy.Provenance
	// PolicyVersion evaluates under another recorded version of the cited
	// policy; "" means the recorded one.
	PolicyVersion string
}

// Result is the outcome of one replay.
type Result struct {
	RequestID       string `json:"request_id"`
	SessionID       string `json:"session_id"`
	Position        int64  `json:"position"`
	Method          string `json:"method"`
	PolicyID        string `json:"policy_id"`
	RecordedVersion string `json:"recorded_version"`
	ReplayedVersion string `json:"replayed_version"`
	// Same is true when the replayed decision equals the recorded one field
	// by field; Diff lists the differing fields otherwise (policy.Diff).
	Same     bool             `json:"same_decision"`
	Diff     []string         `json:"diff"`
	Recorded *policy.Decision `json:"recorded"`
	Replayed *policy.Decision `json:"replayed"`
	// RecordedFrom says where the recorded verdict was read: "response"
	// (the signed answer, the whole verdict) or "entry" (the chained
	// decision only, when no response is stored).
	RecordedFrom string `json:"recorded_from"`
	// NotReconstructed names inputs the ledger does not hold and the
	// caller did not supply; a policy reading them may replay differently.
	NotReconstructed []string `json:"not_reconstructed"`
}

// recordedEntry is what replay reads of a Guardian's ContextEntry
// (docs/guardian.md, "The chain").
type recordedEntry struct {
	StepType    string          `json:"step_type"`
	RequestHash string          `json:"request_hash"`
	AgentID     string          `json:"agent_id"`
	Intent      *recordedIntent `json:"intent"`
	Grants      []string        `json:"this_request_grants"`
	Decision    struct {
		Disposition      policy.Disposition       `json:"disposition"`
		Reasoning        string                   `json:"reasoning"`
		ReasonCodes      []string                 `json:"reason_codes"`
		PolicyReferences []policy.PolicyReference `json:"policy_references"`
		NDBuiltinCache   json.RawMessage          `json:"nd_builtin_cache"`
	} `json:"decision"`
	// intent_extension entries.
	Capabilities []string `json:"capabilities"`
	Scope        string   `json:"scope"`
}

type recordedIntent struct {
	Raw              string             `json:"raw"`
	Parsed           []string           `json:"parsed"`
	ParserProvenance *policy.Provenance `json:"parser_provenance"`
	ScopeMode        string             `json:"scope_mode"`
}

// FindEntry finds the entry whose step_id is requestID. With a sessionID it
// reads that session's chain only. Without one it scans every session's
// chain, page by page: the cost is one read of the whole ledger, O(entries),
// because the stores index step_id only within a session. An index on
// entries(step_id) would make it one lookup.
func FindEntry(ctx context.Context, store ledger.Store, requestID, sessionID string) (ledger.Entry, error) {
	if sessionID != "" {
		return findIn(ctx, store, requestID, sessionID)
	}
	var found *ledger.Entry
	f := ledger.SessionFilter{Limit: ledger.MaxPageSize}
	for {
		page, err := store.Sessions(ctx, f)
		if err != nil {
			return ledger.Entry{}, fmt.Errorf("couldn't list sessions: %w", err)
		}
		for _, s := range page.Sessions {
			e, err := findIn(ctx, store, requestID, s.SessionID)
			if errors.Is(err, ledger.ErrNotFound) {
				continue
			}
			if err != nil {
				return ledger.Entry{}, err
			}
			if found != nil {
				return ledger.Entry{}, fmt.Errorf("%w: request_id %s is a step of sessions %s and %s", ErrAmbiguous, requestID, found.SessionID, e.SessionID)
			}
			found = &e
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if found == nil {
		return ledger.Entry{}, fmt.Errorf("no entry has step_id %s: %w", requestID, ledger.ErrNotFound)
	}
	return *found, nil
}

func findIn(ctx context.Context, store ledger.Store, requestID, sessionID string) (ledger.Entry, error) {
	for e, err := range ledger.AllEntries(ctx, store, sessionID) {
		if err != nil {
			return ledger.Entry{}, fmt.Errorf("couldn't read session %s: %w", sessionID, err)
		}
		if e.StepID == requestID {
			return e, nil
		}
	}
	return ledger.Entry{}, fmt.Errorf("session %s has no entry with step_id %s: %w", sessionID, requestID, ledger.ErrNotFound)
}

// Replay re-evaluates the decision recorded for req.RequestID and compares
// it with the recorded one.
func Replay(ctx context.Context, store ledger.GuardianStore, req Request) (*Result, error) {
	if req.RequestID == "" {
		return nil, fmt.Errorf("%w: no request_id", ErrBadRequest)
	}
	if len(bytes.TrimSpace(req.Params)) == 0 {
		return nil, ErrParamsRequired
	}
	e, err := FindEntry(ctx, store, req.RequestID, req.SessionID)
	if err != nil {
		return nil, err
	}
	var rec recordedEntry
	if err := json.Unmarshal(e.Content, &rec); err != nil {
		return nil, fmt.Errorf("couldn't read the entry of step %s: %w", req.RequestID, err)
	}
	// ACS §8.1: request_hash is SHA-256 of the JCS of params as received.
	got, err := acs.RequestHash(req.Params)
	if err != nil {
		return nil, fmt.Errorf("%w: params: %v", ErrBadRequest, err)
	}
	if got.String() != rec.RequestHash {
		return nil, fmt.Errorf("%w: they hash to %s, the entry records request_hash %s", ErrParamsMismatch, got, rec.RequestHash)
	}
	refs := rec.Decision.PolicyReferences
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: step %s was decided %s with reason codes %v", ErrNotPolicyDecision, req.RequestID, rec.Decision.Disposition, rec.Decision.ReasonCodes)
	}
	res := &Result{
		RequestID: req.RequestID, SessionID: e.SessionID, Position: e.Position, Method: rec.StepType,
		PolicyID: refs[0].PolicyID, RecordedVersion: refs[0].PolicyVersion, ReplayedVersion: refs[0].PolicyVersion,
		Diff: []string{}, NotReconstructed: []string{},
	}
	if req.PolicyVersion != "" {
		res.ReplayedVersion = req.PolicyVersion
	}
	pb, err := store.PolicyBundle(ctx, res.PolicyID, res.ReplayedVersion)
	if err != nil {
		return nil, fmt.Errorf("couldn't load policy bundle %s version %s: %w", res.PolicyID, res.ReplayedVersion, err)
	}
	bundle, err := policy.BundleFromRecord(pb)
	if err != nil {
		return nil, fmt.Errorf("couldn't read policy bundle %s version %s: %w", res.PolicyID, res.ReplayedVersion, err)
	}

	in, err := input(ctx, store, e, &rec, req)
	if err != nil {
		return nil, err
	}
	if req.Provenance == nil {
		res.NotReconstructed = append(res.NotReconstructed, "provenance")
	}
	// The recorded cache is passed under another version too: the replay
	// then answers for the same moment (time.now_ns) and the same random
	// draws, so that only the policy differs.
	res.Replayed, err = policy.Replay(ctx, bundle, in, rec.Decision.NDBuiltinCache)
	if err != nil {
		return nil, fmt.Errorf("couldn't replay step %s under %s %s: %w", req.RequestID, res.PolicyID, res.ReplayedVersion, err)
	}
	res.Recorded, res.RecordedFrom, err = recordedDecision(ctx, store, e, &rec)
	if err != nil {
		return nil, err
	}
	if d := policy.Diff(res.Recorded, res.Replayed); d != nil {
		res.Diff = d
	}
	res.Same = len(res.Diff) == 0
	return res, nil
}

// input rebuilds what the policy saw, as guardian/opapolicy builds it: the
// method and params, the session context (position and the head before
// the step), the Intent as it stood (the last recorded intent, extended by
// approver grants of scope session) with this request's grants.
func input(ctx context.Context, store ledger.Store, e ledger.Entry, rec *recordedEntry, req Request) (*policy.Input, error) {
	in := &policy.Input{
		Method: rec.StepType, Params: req.Params, Provenance: req.Provenance,
		Session: policy.Session{SessionID: e.SessionID, AgentID: rec.AgentID, Position: e.Position},
	}
	if e.PreviousHash != nil {
		in.Session.ChainHash = e.PreviousHash.String()
	}
	var intent *policy.Intent
	if e.Position > 0 {
		for prev, err := range ledger.AllEntries(ctx, store, e.SessionID) {
			if err != nil {
				return nil, fmt.Errorf("couldn't read session %s: %w", e.SessionID, err)
			}
			if prev.Position >= e.Position {
				break
			}
			var p recordedEntry
			if err := json.Unmarshal(prev.Content, &p); err != nil {
				return nil, fmt.Errorf("couldn't read entry %d of session %s: %w", prev.Position, e.SessionID, err)
			}
			switch {
			case p.Intent != nil:
				intent = p.Intent.policy()
			case p.StepType == "intent_extension" && p.Scope == "session" && intent != nil:
				intent.Parsed = append(intent.Parsed, p.Capabilities...)
			}
		}
	}
	if rec.Intent != nil {
		intent = rec.Intent.policy()
	}
	if intent != nil || len(rec.Grants) > 0 {
		if intent == nil {
			intent = &policy.Intent{}
		}
		intent.Parsed = append(intent.Parsed, rec.Grants...)
		in.Intent = intent
	}
	return in, nil
}

func (i *recordedIntent) policy() *policy.Intent {
	return &policy.Intent{Raw: i.Raw, Parsed: append([]string(nil), i.Parsed...), ParserProvenance: i.ParserProvenance, ScopeMode: i.ScopeMode}
}

// recordedDecision reads the verdict the Guardian answered: from the signed
// response when one is stored (every field of the verdict), else from the
// chained decision.
func recordedDecision(ctx context.Context, store ledger.GuardianStore, e ledger.Entry, rec *recordedEntry) (*policy.Decision, string, error) {
	resp, err := store.Response(ctx, e.SessionID, e.Position)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return &policy.Decision{
			Disposition: rec.Decision.Disposition, Reasoning: rec.Decision.Reasoning,
			ReasonCodes: rec.Decision.ReasonCodes, PolicyReferences: rec.Decision.PolicyReferences,
		}, "entry", nil
	case err != nil:
		return nil, "", fmt.Errorf("couldn't read the response of session %s at position %d: %w", e.SessionID, e.Position, err)
	}
	var env struct {
		Result *policy.Decision `json:"result"`
	}
	if err := json.Unmarshal(resp, &env); err != nil || env.Result == nil {
		return nil, "", fmt.Errorf("the response of session %s at position %d is not a decision result", e.SessionID, e.Position)
	}
	return env.Result, "response", nil
}
