// Package replay re-evaluates a recorded Guardian decision (docs/policy.md,
// "Replay"): the same request under the policy bundle version the decision
// cites, with the non-deterministic built-in results recorded beside it, to
// answer "why was this allowed?" and, under another recorded version,
// "would that policy have decided otherwise?".
//
// Everything comes from the ledger. A ContextEntry records the step's
// method, its position and previous head, the request's request_hash, the
// Intent it established, this-request grants, the session state the policy
// saw that the chain does not hold (metadata.approver_capable and
// metadata.deferrals), and the decision with its policy_references and
// nd_builtin_cache; the signed response records the full verdict
// (modifications, ask and defer details, policy_data, cited provenance);
// and the request's params are stored beside the entry
// (Store.Request), apart from what the chain commits to so
// that they can be erased. The params are checked against the entry's
// request_hash (ACS §8.1) before anything is evaluated. The provenance the
// policy saw, the step's lineage among the objects of the session's
// earlier steps, is rebuilt from their stored params as the Guardian
// collects it (guardian.StepProvenance).
//
// Replay rebuilds the Guardian's view of the step (guardian.Input) from
// these and turns it into the engine's input with
// [opapolicy.BuildInput], the function the live decision uses, so the two
// inputs cannot drift apart.
//
// A caller may still supply the params (checked against request_hash like
// the stored ones), which is the only way to replay a step whose params
// were erased, and the provenance. An input the ledger cannot give back is
// named in Result.NotReconstructed.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
)

// Errors a caller maps to its own (one switch in web, exit codes in cmd).
var (
	// ErrParamsRequired: the ledger holds no params for the step (the
	// entry was written without them) and the caller supplied none. Params
	// that were erased (ledger.ParamsEraser.EraseParams) and not supplied
	// are an error matching ledger.ErrErased instead, whose
	// *ledger.ErasedError says when, why and by whom.
	ErrParamsRequired = errors.New("the request's params are required: the ledger holds none for this step")
	// ErrParamsMismatch: the supplied params do not hash to the entry's
	// request_hash, so they are not the request that was decided.
	ErrParamsMismatch = errors.New("the supplied params are not the recorded request")
	// ErrStoredParamsMismatch: params stored beside an entry do not hash to
	// its request_hash. The ledger is inconsistent (the chain verifies,
	// the side table does not match it); nothing is evaluated.
	ErrStoredParamsMismatch = errors.New("the stored params are not the recorded request")
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
	// SessionID narrows the lookup to one session; "" looks in every
	// session (see FindEntry).
	SessionID string
	// Params optionally supply the recorded request's params exactly as
	// sent, signature included; nil means the stored ones. Either way they
	// must hash to the entry's request_hash.
	Params json.RawMessage
	// Provenance optionally supplies the provenance objects (ACS §7) of
	// the session's earlier steps, as the Guardian hands them to its policy
	// (guardian.Input.Provenance), and they go to the policy as supplied;
	// nil means rebuilt from their stored params. Each must be a JSON
	// object with a string provenance_id.
	Provenance []json.RawMessage
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
	// ParamsFrom says where the params came from: "ledger" (stored beside
	// the entry) or "request" (supplied by the caller).
	ParamsFrom string `json:"params_from"`
	// NotReconstructed names inputs the ledger does not hold and the
	// caller did not supply, or holds only approximately; a policy reading
	// them may replay differently.
	NotReconstructed []string `json:"not_reconstructed"`
}

// recordedEntry is what replay reads of a Guardian's ContextEntry
// (docs/guardian.md, "The chain").
type recordedEntry struct {
	StepType    string           `json:"step_type"`
	RequestHash string           `json:"request_hash"`
	AgentID     string           `json:"agent_id"`
	TurnID      string           `json:"turn_id"`
	Intent      *guardian.Intent `json:"intent"`
	Grants      []string         `json:"this_request_grants"`
	Decision    struct {
		Disposition      acs.Disposition       `json:"disposition"`
		Reasoning        string                `json:"reasoning"`
		ReasonCodes      []string              `json:"reason_codes"`
		PolicyReferences []acs.PolicyReference `json:"policy_references"`
		// NDBuiltinCache is a JSON string holding the cache's bytes (a
		// JSON object in entries written before the Guardian recorded
		// it as a string).
		NDBuiltinCache json.RawMessage `json:"nd_builtin_cache"`
	} `json:"decision"`
	// Metadata is the session state the policy saw that the chain does
	// not hold; nil in entries written before the Guardian recorded it.
	Metadata *recordedMetadata `json:"metadata"`
	// intent_extension entries.
	Capabilities []string     `json:"capabilities"`
	Scope        string       `json:"scope"`
	Approver     acs.Approver `json:"approver"`
	AskStepID    string       `json:"ask_step_id"`
}

// recordedMetadata is the entry's metadata: the members of input.session
// the chain does not hold. Either is nil when the entry lacks it.
type recordedMetadata struct {
	ApproverCapable *bool `json:"approver_capable"`
	Deferrals       *int  `json:"deferrals"`
}

// StepFinder finds a step's entries by step_id (ledger.Store.EntriesByStep,
// whose contract it shares): in one session, or in every session when
// sessionID is "".
type StepFinder interface {
	EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error)
}

// Store is what replay reads of the ledger, each method with the contract
// its ledger role gives it: the step's entry (EntriesByStep) and the
// session's earlier entries (Entries, a page from a position), the params
// and the signed response stored beside an entry (Request and Response,
// ledger.ErrNotFound when none was stored, an error matching
// ledger.ErrErased when the params were erased), and the policy bundle a
// decision cites (PolicyBundle, ledger.ErrNotFound for an unknown
// version).
type Store interface {
	StepFinder
	Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error)
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)
	PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error)
}

// FindEntry finds the entry whose step_id is requestID (a Guardian step's
// step_id is its request_id): in session sessionID, or in any session when
// sessionID is "". Either way it is one indexed lookup
// (StepFinder.EntriesByStep), whose cost does not grow with the ledger.
// It returns ledger.ErrNotFound when no entry matches, and ErrAmbiguous,
// naming two of the sessions, when the step_id is in several sessions and
// no session was named.
func FindEntry(ctx context.Context, store StepFinder, requestID, sessionID string) (ledger.Entry, error) {
	es, err := store.EntriesByStep(ctx, requestID, sessionID)
	if err != nil {
		return ledger.Entry{}, err
	}
	switch {
	case len(es) == 0 && sessionID != "":
		return ledger.Entry{}, fmt.Errorf("session %s has no entry with step_id %s: %w", sessionID, requestID, ledger.ErrNotFound)
	case len(es) == 0:
		return ledger.Entry{}, fmt.Errorf("no entry has step_id %s: %w", requestID, ledger.ErrNotFound)
	case len(es) > 1:
		return ledger.Entry{}, fmt.Errorf("%w: request_id %s is a step of sessions %s and %s", ErrAmbiguous, requestID, es[0].SessionID, es[1].SessionID)
	}
	return es[0], nil
}

// Replay re-evaluates the decision recorded for req.RequestID and compares
// it with the recorded one.
func Replay(ctx context.Context, store Store, req Request) (*Result, error) {
	if req.RequestID == "" {
		return nil, fmt.Errorf("%w: no request_id", ErrBadRequest)
	}
	if err := checkProvenance(req.Provenance); err != nil {
		return nil, err
	}
	e, err := FindEntry(ctx, store, req.RequestID, req.SessionID)
	if err != nil {
		return nil, err
	}
	rec, err := readEntry(e)
	if err != nil {
		return nil, err
	}
	res := &Result{
		RequestID: req.RequestID, SessionID: e.SessionID, Position: e.Position, Method: rec.StepType,
		Diff: []string{}, NotReconstructed: []string{},
	}
	params, err := requestParams(ctx, store, e, rec, req, res)
	if err != nil {
		return nil, err
	}
	refs := rec.Decision.PolicyReferences
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: step %s was decided %s with reason codes %v", ErrNotPolicyDecision, req.RequestID, rec.Decision.Disposition, rec.Decision.ReasonCodes)
	}
	res.PolicyID, res.RecordedVersion, res.ReplayedVersion = refs[0].PolicyID, refs[0].PolicyVersion, refs[0].PolicyVersion
	if req.PolicyVersion != "" {
		res.ReplayedVersion = req.PolicyVersion
	}
	cache, err := recordedCache(rec.Decision.NDBuiltinCache)
	if err != nil {
		return nil, fmt.Errorf("couldn't read nd_builtin_cache of step %s: %w", req.RequestID, err)
	}
	if len(rec.Decision.NDBuiltinCache) > 0 && rec.Decision.NDBuiltinCache[0] == '{' {
		res.NotReconstructed = append(res.NotReconstructed, "nd_builtin_cache (recorded as a JSON object, so integers above 2^53 may have been rounded)")
	}
	pb, err := store.PolicyBundle(ctx, res.PolicyID, res.ReplayedVersion)
	if err != nil {
		return nil, fmt.Errorf("couldn't load policy bundle %s version %s: %w", res.PolicyID, res.ReplayedVersion, err)
	}
	bundle, err := policy.BundleFromRecord(pb)
	if err != nil {
		return nil, fmt.Errorf("couldn't read policy bundle %s version %s: %w", res.PolicyID, res.ReplayedVersion, err)
	}

	gin, err := guardianInput(ctx, store, e, rec, req, params, res)
	if err != nil {
		return nil, err
	}
	in, err := opapolicy.BuildInput(gin)
	if err != nil {
		return nil, fmt.Errorf("couldn't build the policy input of step %s: %w", req.RequestID, err)
	}
	// The recorded cache is passed under another version too: the replay
	// then answers for the same moment (time.now_ns) and the same random
	// draws, so that only the policy differs.
	res.Replayed, err = policy.Replay(ctx, bundle, in, cache)
	if err != nil {
		return nil, fmt.Errorf("couldn't replay step %s under %s %s: %w", req.RequestID, res.PolicyID, res.ReplayedVersion, err)
	}
	res.Recorded, res.RecordedFrom, err = recordedDecision(ctx, store, e, rec)
	if err != nil {
		return nil, err
	}
	if d := policy.Diff(res.Recorded, res.Replayed); d != nil {
		res.Diff = d
	}
	res.Same = len(res.Diff) == 0
	return res, nil
}

// readEntry reads what replay needs of a Guardian's ContextEntry.
func readEntry(e ledger.Entry) (*recordedEntry, error) {
	var rec recordedEntry
	if err := json.Unmarshal(e.Content, &rec); err != nil {
		return nil, fmt.Errorf("couldn't read the entry of step %s: %w", e.StepID, err)
	}
	return &rec, nil
}

// requestParams returns the params of the recorded request: the caller's if
// given, else the stored ones. Whichever is used, and the stored ones when
// present, must hash to the entry's request_hash.
func requestParams(ctx context.Context, store Store, e ledger.Entry, rec *recordedEntry, req Request, res *Result) (json.RawMessage, error) {
	stored, err := store.Request(ctx, e.SessionID, e.Position)
	var erased *ledger.ErasedError
	switch {
	case errors.Is(err, ledger.ErrNotFound), errors.As(err, &erased):
		stored = nil
	case err != nil:
		return nil, err
	default:
		if err := checkHash(stored, rec.RequestHash); err != nil {
			return nil, fmt.Errorf("%w: session %s position %d: %v", ErrStoredParamsMismatch, e.SessionID, e.Position, err)
		}
	}
	if len(bytes.TrimSpace(req.Params)) > 0 {
		if err := checkHash(req.Params, rec.RequestHash); err != nil {
			if errors.Is(err, ErrBadRequest) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrParamsMismatch, err)
		}
		res.ParamsFrom = "request"
		return req.Params, nil
	}
	if erased != nil {
		return nil, fmt.Errorf("step %s cannot be replayed from the ledger alone: %w; supply the params as sent (they must hash to the entry's request_hash)", req.RequestID, erased)
	}
	if stored == nil {
		return nil, fmt.Errorf("%w: session %s position %d (step %s)", ErrParamsRequired, e.SessionID, e.Position, req.RequestID)
	}
	res.ParamsFrom = "ledger"
	return stored, nil
}

// checkHash checks that params hash to requestHash (ACS §8.1: SHA-256 of
// the JCS of params as received).
func checkHash(params []byte, requestHash string) error {
	got, err := acs.RequestHash(params)
	if err != nil {
		return fmt.Errorf("%w: params: %v", ErrBadRequest, err)
	}
	if got.String() != requestHash {
		return fmt.Errorf("they hash to %s, the entry records request_hash %s", got, requestHash)
	}
	return nil
}

// recordedCache returns the bytes of the recorded nd_builtin_cache: the
// content of the JSON string the Guardian writes, or an object as written
// before it did.
func recordedCache(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	case raw[0] == '{':
		return raw, nil
	}
	return nil, fmt.Errorf("not a string: %.40s", raw)
}

// checkProvenance refuses supplied provenance the Guardian would not have
// kept (guardian.ProvenanceLog keeps objects with a string
// provenance_id).
func checkProvenance(ps []json.RawMessage) error {
	for i, raw := range ps {
		var p struct {
			ID *string `json:"provenance_id"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.ID == nil {
			return fmt.Errorf("%w: provenance[%d] is not an object with a string provenance_id", ErrBadRequest, i)
		}
	}
	return nil
}

// guardianInput rebuilds the Guardian's view of the recorded step, the
// Input it handed its policy: the session's earlier entries folded into a
// History (reading their stored params for provenance), then the step.
func guardianInput(ctx context.Context, store Store, e ledger.Entry, rec *recordedEntry, req Request, params json.RawMessage, res *Result) (guardian.Input, error) {
	h := NewHistory(e.SessionID)
	h.ignoreProvenance = req.Provenance != nil
	if err := h.CatchUp(ctx, store, e.Position); err != nil {
		return guardian.Input{}, err
	}
	in, notRebuilt, err := h.input(e, rec, params, req.Provenance)
	res.NotReconstructed = append(res.NotReconstructed, notRebuilt...)
	return in, err
}

// History is what the Guardian's view of a step needs from the session's
// earlier entries: the Intent as it stood (the last recorded intent,
// extended by approver grants of scope session), the count of earlier
// DEFER decisions, and the payloads of the earlier steps whose provenance
// the step's lineage is rebuilt from. It is built one entry at a time in
// chain order, so a run over many steps of a session (guardian/whatif)
// reads each entry once; Replay builds one for its single step.
type History struct {
	sessionID string
	// Next is the position of the next entry Add expects.
	Next   int64
	intent *guardian.Intent
	// log holds the provenance objects of the earlier steps' payloads,
	// as the Guardian's own log holds them.
	log                guardian.ProvenanceLog
	provenanceComplete bool
	deferrals          int
	// ignoreProvenance: the caller supplies provenance, so no payload is
	// kept.
	ignoreProvenance bool
	// checked is the params Recorded checked against the entry at
	// h.Next, and parsed that entry, which Add then need not hash or
	// parse again.
	checked []byte
	parsed  *recordedEntry
}

// NewHistory returns the History of a session before its first entry.
func NewHistory(sessionID string) *History {
	return &History{sessionID: sessionID, provenanceComplete: true}
}

// Add folds the session's entry at h.Next into h. params are the params
// stored beside it (nil when none are stored or they were erased: the
// provenance is then incomplete); they must hash to the entry's
// request_hash.
func (h *History) Add(e ledger.Entry, params []byte) error {
	if e.SessionID != h.sessionID || e.Position != h.Next {
		return fmt.Errorf("history of session %s expects position %d, got session %s position %d", h.sessionID, h.Next, e.SessionID, e.Position)
	}
	checked, parsed := h.checked, h.parsed
	h.checked, h.parsed = nil, nil
	var p recordedEntry
	if parsed != nil {
		p = *parsed
	} else if err := json.Unmarshal(e.Content, &p); err != nil {
		return fmt.Errorf("couldn't read entry %d of session %s: %w", e.Position, e.SessionID, err)
	}
	h.Next++
	switch {
	case p.Intent != nil:
		h.intent = p.Intent
	case p.StepType == guardian.StepIntentExtension && p.Scope == "session" && len(p.Capabilities) > 0:
		// As the Guardian grew it (guardian.Intent.Extend).
		h.intent = h.intent.Extend(guardian.IntentExtension{Capabilities: p.Capabilities, Approver: p.Approver, AskStepID: p.AskStepID, StepID: e.StepID})
	}
	if p.Decision.Disposition == acs.Defer {
		h.deferrals++
	}
	if h.ignoreProvenance || p.RequestHash == "" || p.StepType == guardian.StepIntentExtension || p.StepType == guardian.StepAskResolution {
		// Supplied by the caller, or not a Guardian step (an approver's
		// resolution, whose request_hash is over the approval): the
		// Guardian collects provenance from the payloads of steps only.
		return nil
	}
	if params == nil {
		h.provenanceComplete = false
		return nil
	}
	if !(len(checked) > 0 && len(checked) == len(params) && &checked[0] == &params[0]) {
		if err := checkHash(params, p.RequestHash); err != nil {
			h.provenanceComplete = false
			return fmt.Errorf("%w: session %s position %d: %v", ErrStoredParamsMismatch, e.SessionID, e.Position, err)
		}
	}
	var pl struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(params, &pl); err != nil {
		return fmt.Errorf("the stored params of session %s position %d are not a JSON object: %w", e.SessionID, e.Position, err)
	}
	h.log.Add(pl.Payload)
	return nil
}

// CatchUp folds the session's entries from h.Next up to (not including)
// position end, reading them and their stored params from store.
func (h *History) CatchUp(ctx context.Context, store StepHistoryReader, end int64) error {
	for h.Next < end {
		page, err := store.Entries(ctx, h.sessionID, h.Next, ledger.MaxPageSize)
		if err != nil {
			return fmt.Errorf("couldn't read session %s: %w", h.sessionID, err)
		}
		if len(page) == 0 {
			return fmt.Errorf("session %s ends before position %d", h.sessionID, end)
		}
		for _, prev := range page {
			if prev.Position >= end {
				return nil
			}
			var params []byte
			if !h.ignoreProvenance {
				params, err = store.Request(ctx, prev.SessionID, prev.Position)
				switch {
				case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrErased):
					params = nil
				case err != nil:
					return err
				}
			}
			if err := h.Add(prev, params); err != nil {
				return err
			}
		}
	}
	return nil
}

// StepHistoryReader is what CatchUp reads: a session's entries from a
// position and the params stored beside each (Store's contracts).
type StepHistoryReader interface {
	Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error)
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
}

// input is the Guardian's Input for the step e at h.Next, with the inputs
// the ledger could not give back.
func (h *History) input(e ledger.Entry, rec *recordedEntry, params json.RawMessage, provenance []json.RawMessage) (guardian.Input, []string, error) {
	var notRebuilt []string
	in := guardian.Input{
		Method: rec.StepType, SessionID: e.SessionID, AgentID: rec.AgentID, RequestID: e.StepID, TurnID: rec.TurnID,
		Params: params, Grants: rec.Grants, Provenance: provenance,
		Session: guardian.SessionState{Length: e.Position},
	}
	var p struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return guardian.Input{}, nil, fmt.Errorf("%w: params are not a JSON object: %v", ErrBadRequest, err)
	}
	in.Payload = p.Payload
	if e.PreviousHash != nil {
		in.Session.ChainHash = e.PreviousHash.String()
	}
	in.Intent = h.intent
	if rec.Intent != nil {
		in.Intent = rec.Intent
	}
	if provenance == nil {
		// guardian.StepProvenance over the log kept so far.
		var doc any
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.UseNumber()
		if dec.Decode(&doc) != nil {
			doc = nil
		}
		in.Provenance = h.log.Lineage(doc, in.Intent)
		if !h.provenanceComplete {
			notRebuilt = append(notRebuilt, "provenance")
		}
	}

	m := rec.Metadata
	if m == nil {
		// An entry written before the Guardian recorded its metadata.
		m = &recordedMetadata{}
	}
	if m.ApproverCapable != nil {
		in.Session.ApproverCapable = *m.ApproverCapable
	} else {
		notRebuilt = append(notRebuilt, "session.approver_capable (the entry has no metadata.approver_capable; replayed as false, the Guardian's default)")
	}
	if m.Deferrals != nil {
		in.Session.Deferrals = *m.Deferrals
	} else {
		in.Session.Deferrals = h.deferrals
		notRebuilt = append(notRebuilt, "session.deferrals (the entry has no metadata.deferrals; replayed as the count of earlier DEFER decisions in the chain)")
	}
	return in, notRebuilt, nil
}

// recordedDecision reads the verdict the Guardian answered: from the signed
// response when one is stored (every field of the verdict), else from the
// chained decision.
func recordedDecision(ctx context.Context, store Store, e ledger.Entry, rec *recordedEntry) (*policy.Decision, string, error) {
	resp, err := store.Response(ctx, e.SessionID, e.Position)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		resp = nil
	case err != nil:
		return nil, "", fmt.Errorf("couldn't read the response of session %s at position %d: %w", e.SessionID, e.Position, err)
	}
	d, _, from, err := decisionFrom(resp, e, rec)
	return d, from, err
}

// decisionFrom is the recorded verdict and the response's
// metadata.evaluator_version: from the signed response resp when there is
// one, else from the chained decision.
func decisionFrom(resp []byte, e ledger.Entry, rec *recordedEntry) (*policy.Decision, string, string, error) {
	if resp == nil {
		return &policy.Decision{
			Disposition: rec.Decision.Disposition, Reasoning: rec.Decision.Reasoning,
			ReasonCodes: rec.Decision.ReasonCodes, PolicyReferences: rec.Decision.PolicyReferences,
		}, "", "entry", nil
	}
	var env struct {
		Result *struct {
			policy.Decision
			Metadata struct {
				EvaluatorVersion string `json:"evaluator_version"`
			} `json:"metadata"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &env); err != nil || env.Result == nil {
		return nil, "", "", fmt.Errorf("the response of session %s at position %d is not a decision result", e.SessionID, e.Position)
	}
	d := env.Result.Decision
	return &d, env.Result.Metadata.EvaluatorVersion, "response", nil
}

// Recorded is one recorded Guardian policy decision, ready to be evaluated
// again under another bundle (guardian/whatif).
type Recorded struct {
	// Input is the policy input the live decision evaluated, rebuilt by
	// opapolicy.BuildInput.
	Input *policy.Input
	// Decision is the recorded verdict; NDCache the non-deterministic
	// built-in results recorded with it.
	Decision *policy.Decision
	NDCache  []byte
	// PolicyID and PolicyVersion name the bundle the decision cites.
	PolicyID, PolicyVersion string
	// EvaluatorVersion is the response's metadata.evaluator_version, ""
	// when no response names one.
	EvaluatorVersion string
	// NotReconstructed names inputs the ledger holds only approximately.
	NotReconstructed []string
}

// Recorded rebuilds the decision recorded for the step e, the entry at
// h.Next, from its params (stored beside it; checked against the entry's
// request_hash) and its signed response (nil when none is stored). The
// caller folds the step into h with Add afterwards. It returns
// ErrNotPolicyDecision for a step that cites no policy bundle.
func (h *History) Recorded(e ledger.Entry, params, response []byte) (*Recorded, error) {
	if e.SessionID != h.sessionID || e.Position != h.Next {
		return nil, fmt.Errorf("history of session %s is at position %d, not at session %s position %d", h.sessionID, h.Next, e.SessionID, e.Position)
	}
	rec, err := readEntry(e)
	if err != nil {
		return nil, err
	}
	refs := rec.Decision.PolicyReferences
	if len(refs) == 0 || rec.RequestHash == "" {
		return nil, fmt.Errorf("%w: step %s was decided %s with reason codes %v", ErrNotPolicyDecision, e.StepID, rec.Decision.Disposition, rec.Decision.ReasonCodes)
	}
	if err := checkHash(params, rec.RequestHash); err != nil {
		return nil, fmt.Errorf("%w: session %s position %d: %v", ErrStoredParamsMismatch, e.SessionID, e.Position, err)
	}
	h.checked, h.parsed = params, rec
	r := &Recorded{PolicyID: refs[0].PolicyID, PolicyVersion: refs[0].PolicyVersion}
	if r.NDCache, err = recordedCache(rec.Decision.NDBuiltinCache); err != nil {
		return nil, fmt.Errorf("couldn't read nd_builtin_cache of step %s: %w", e.StepID, err)
	}
	if len(rec.Decision.NDBuiltinCache) > 0 && rec.Decision.NDBuiltinCache[0] == '{' {
		r.NotReconstructed = append(r.NotReconstructed, "nd_builtin_cache (recorded as a JSON object, so integers above 2^53 may have been rounded)")
	}
	gin, notRebuilt, err := h.input(e, rec, params, nil)
	if err != nil {
		return nil, err
	}
	r.NotReconstructed = append(r.NotReconstructed, notRebuilt...)
	if r.Input, err = opapolicy.BuildInput(gin); err != nil {
		return nil, fmt.Errorf("couldn't build the policy input of step %s: %w", e.StepID, err)
	}
	if r.Decision, r.EvaluatorVersion, _, err = decisionFrom(response, e, rec); err != nil {
		return nil, err
	}
	return r, nil
}
