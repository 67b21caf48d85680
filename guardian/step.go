package guardian

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

const (
	timeFormat = "2006-01-02T15:04:05.000000000Z07:00"
	timeRound  = time.Millisecond
)

// acsResult is response-envelope.json $defs/AcsResult.
type acsResult struct {
	Type               string                `json:"type"`
	ACSVersion         string                `json:"acs_version"`
	RequestID          string                `json:"request_id"`
	Decision           Disposition           `json:"decision"`
	Reasoning          string                `json:"reasoning,omitempty"`
	ReasonCodes        []string              `json:"reason_codes,omitempty"`
	PolicyReferences   []acs.PolicyReference `json:"policy_references,omitempty"`
	PolicyData         json.RawMessage       `json:"policy_data,omitempty"`
	CitedProvenanceIDs []string              `json:"cited_provenance_ids,omitempty"`
	Modifications      *acs.Modifications    `json:"modifications,omitempty"`
	AskDetails         *acs.AskDetails       `json:"ask_details,omitempty"`
	DeferDetails       *acs.DeferDetails     `json:"defer_details,omitempty"`
	Payload            any                   `json:"payload,omitempty"`
	ChainHash          string                `json:"chain_hash,omitempty"`
	Metadata           *resultMetadata       `json:"metadata,omitempty"`

	// PreviousChainHash is set when entries the Guardian wrote on its own
	// (approver resolutions) lie between the head last published to the
	// agent and this step's entry: it is the head this entry was chained
	// onto (docs/guardian.md, "Head after a grant").
	PreviousChainHash string `json:"previous_chain_hash,omitempty"`
}

type resultMetadata struct {
	Evaluator            string `json:"evaluator"`
	EvaluatorVersion     string `json:"evaluator_version,omitempty"`
	EvaluationDurationMS int64  `json:"evaluation_duration_ms"`
}

// contextEntry is the ContextEntry the Guardian writes for a step (ACS
// §8.1). The ledger adds previous_hash and entry_hash.
type contextEntry struct {
	acs.EntryHead
	AgentID     string        `json:"agent_id"`
	TurnID      string        `json:"turn_id,omitempty"`
	Decision    entryDecision `json:"decision"`
	Intent      *Intent       `json:"intent,omitempty"`
	AuditEvents []string      `json:"audit_events,omitempty"`
	Grants      []string      `json:"this_request_grants,omitempty"`
	Metadata    entryMetadata `json:"metadata"`
	// ProvenanceSummary is the entry-level summary of the provenance the
	// step's payload carried (§8.3), on the entries of sessions that
	// produce provenance (provenance.go, provenanceSummary).
	ProvenanceSummary *provenanceSummary `json:"provenance_summary,omitempty"`
}

// entryMetadata is the session state the policy's input held
// (SessionState, input.session) that the chain does not: the chain gives
// the position and the head before the step, not how many DEFERs the
// session had had nor whether its client could route an ASK, which the
// Guardian keeps in memory. Recorded in the entry, it is covered by
// entry_hash, and replay (guardian/replay) rebuilds input.session from it.
type entryMetadata struct {
	ApproverCapable bool `json:"approver_capable"`
	Deferrals       int  `json:"deferrals"`
}

// entryDecision is what replay needs of a decision: the verdict, the rules
// and their versions, and the policy's non-deterministic inputs.
//
// NDBuiltinCache is the policy's Decision.Cache as a JSON string holding
// its bytes unchanged, not as a JSON value: the ledger stores entries in
// RFC 8785 form, which would turn integers above 2^53 (time.now_ns) into
// doubles and so change the moment a replay evaluates at.
type entryDecision struct {
	Disposition      Disposition           `json:"disposition"`
	Reasoning        string                `json:"reasoning,omitempty"`
	ReasonCodes      []string              `json:"reason_codes"`
	PolicyReferences []acs.PolicyReference `json:"policy_references"`
	NDBuiltinCache   string                `json:"nd_builtin_cache,omitempty"`
	// Ask is the ASK's ask_details, so that a resumed session knows the
	// ASKs still pending, whom they name and what they requested.
	Ask *acs.AskDetails `json:"ask_details,omitempty"`
}

// sessionOf returns the session req is signed for once its signature
// verified and its agent_id is the session's, or else nil and the refusal
// to answer; noHandshake ends the message refusing a session without a
// handshake. Refusals before the signature is verified are signed with
// the Guardian's own key; after it, with the session's.
func (g *Guardian) sessionOf(req *request, noHandshake string) (*session, []byte) {
	s := g.session(req.sessionID)
	if s == nil {
		return nil, g.errorResponse(req.id, refuse(rpcerr.CapabilityNotNegotiated, "no_handshake",
			fmt.Sprintf("session %s has not completed handshake/hello%s", req.sessionID, noHandshake),
			"method", MethodHello), nil)
	}
	if _, _, e := g.authenticate(req, s); e != nil {
		return nil, g.errorResponse(req.id, e, nil)
	}
	if req.agentID != s.agentID {
		return nil, g.errorResponse(req.id, refuse(rpcerr.SessionRefused, "agent_mismatch",
			fmt.Sprintf("session %s is bound to agent_id %q at handshake, not %q", s.id, s.agentID, req.agentID)), s.signer)
	}
	return s, nil
}

// step handles a content-bearing method: steps/*, MCP and agbom/*.
func (g *Guardian) step(ctx context.Context, req *request) []byte {
	s, refusal := g.sessionOf(req, "; nothing is negotiated for it (ACS §4)")
	if s == nil {
		return refusal
	}
	if !compatible(req.acsVersion) {
		return g.errorResponse(req.id, refuse(rpcerr.UnsupportedVersion, "unsupported_version",
			fmt.Sprintf("acs_version %s is not compatible with the negotiated %s", req.acsVersion, Version),
			"supported_versions", []string{Version}), s.signer)
	}
	if e := g.negotiated(req, s); e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}
	if e := s.checkProvenance(req); e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}
	if e := checkSkillPayload(req.method, req.payload); e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}
	if e := g.checkFresh(req); e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	newIntent, intentEvent, e := g.intentUpdate(req, s)
	if e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}
	// The durable seen-request check is made with the append (AppendRequest);
	// a request this Guardian already saw in the session is refused here,
	// before the policy runs.
	if s.seen.has(req.requestID, req.nonce) {
		return g.errorResponse(req.id, refuseSeenRequest(req), s.signer)
	}
	return g.decideAndAppend(ctx, req, s, newIntent, intentEvent)
}

// negotiated enforces CAPABILITY_NOT_NEGOTIATED (ACS §17.1): the method
// must be one the client declared, and a pinned MCP version one it
// declared in wrapped_protocols.
func (g *Guardian) negotiated(req *request, s *session) *rpcerr.Error {
	if !implemented(s.hello.MethodsImplemented, req.method) {
		return refuse(rpcerr.CapabilityNotNegotiated, "method_not_negotiated",
			fmt.Sprintf("method %s is not in the methods_implemented the client declared at handshake", req.method),
			"method", req.method)
	}
	if v := req.spec.mcpVersion; v != "" {
		for _, have := range s.mcpVersions {
			if have == v {
				return nil
			}
		}
		return refuse(rpcerr.CapabilityNotNegotiated, "protocol_version_not_negotiated",
			fmt.Sprintf("method %s pins MCP %s, which the client's wrapped_protocols did not declare", req.method, v),
			"method", req.method)
	}
	return nil
}

// decideAndAppend runs the policy, writes the step's ContextEntry and the
// signed answer in one ledger transaction, and returns the answer. Called
// with s.mu held.
func (g *Guardian) decideAndAppend(ctx context.Context, req *request, s *session, newIntent *Intent, intentEvent string) []byte {
	start := time.Now()
	ctx, stepSpan := g.startStep(ctx, req, s)
	defer stepSpan.End()
	state := SessionState{
		Length:          s.length,
		Deferrals:       s.deferrals,
		ApproverCapable: g.cfg.ApproverCapable != nil && g.cfg.ApproverCapable(s.agentID),
	}
	if s.head != nil {
		state.ChainHash = s.head.String()
	}

	var d Decision
	var audit []string
	if intentEvent != "" {
		audit = append(audit, intentEvent)
	}
	// Grants for this request only (§9.1) apply to the request they
	// answer, and are used up once it is chained. The request's key is
	// computed only when a grant may match it or an ASK may pause it.
	key := ""
	if len(s.grants) > 0 {
		key = req.key()
	}
	grants := s.grantsFor(key)
	switch {
	case req.clientHead != "" && req.clientHead != state.ChainHash && !s.knownToAgent(req.clientHead):
		// ACS §8.6: the client's view of the head disagrees with ours.
		// The Guardian can still decide, so it denies rather than erring.
		d = Decision{
			Disposition: Deny,
			Reasoning:   fmt.Sprintf("the chain_hash the client sent (%s) is not this session's chain head (%s)", req.clientHead, headText(state.ChainHash)),
			ReasonCodes: []string{ReasonChainMismatch},
		}
	default:
		in := Input{
			Method: req.method, SessionID: s.id, AgentID: s.agentID, RequestID: req.requestID,
			TurnID: req.turnID, Params: req.params, Payload: req.payload, ParamsValue: req.paramsDoc,
			Intent: s.intent.clone(), Grants: grants, Session: state,
		}
		if newIntent != nil {
			in.Intent = newIntent.clone()
		}
		in.Provenance = s.prov.Lineage(req.paramsValue(), in.Intent)
		pd, err := g.decide(ctx, req.method, in)
		if err != nil {
			g.cfg.Logger.Error("guardian: policy failed", "session_id", s.id, "method", req.method, "err", err)
			if g.cfg.OnDecisionFailure != PostureDeny {
				// No entry is written, so the seen-request history is
				// written on its own.
				if e, err := g.recordRequest(ctx, req); err != nil {
					return g.ledgerFailure(ctx, req, s, Decision{}, err)
				} else if e != nil {
					return g.errorResponse(req.id, e, s.signer)
				}
				s.seen.add(req.requestID, req.nonce)
				return g.errorResponse(req.id, refuse(rpcerr.InternalError, ReasonPolicyFailure,
					"the policy could not reach a decision; apply the negotiated on_decision_failure posture"), s.signer)
			}
			pd = Decision{Disposition: Deny, Reasoning: "the policy could not reach a decision and the failure posture is deny (ACS §6.4)", ReasonCodes: []string{ReasonPolicyFailure}}
		}
		d = g.settle(pd, state)
		if ev := askSubstitution(pd, d); ev != "" {
			// ACS §9.2: the substitution is an audit event.
			audit = append(audit, ev)
		}
	}
	if req.method == MethodSkillLoad {
		d = s.enforceSkillLoad(req.payload, d)
	}
	// What the hook and the client allow (§6.5, postCompact).
	d, limitEvents := g.limitDecision(req.method, d, s.modifyCapable)
	audit = append(audit, limitEvents...)

	reqHash, err := requestHash(req)
	if err != nil {
		// The body passed the canonicalizer; this cannot happen.
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, "", "internal error"), s.signer)
	}
	entry := contextEntry{
		EntryHead: acs.EntryHead{
			EntryID:     acs.NewUUID(),
			StepID:      req.requestID,
			StepType:    req.method,
			Timestamp:   g.cfg.Clock().UTC().Format(timeFormat),
			RequestHash: reqHash.String(),
		},
		AgentID: s.agentID,
		TurnID:  req.turnID,
		Decision: entryDecision{
			Disposition:      d.Disposition,
			Reasoning:        d.Reasoning,
			ReasonCodes:      nonNil(d.ReasonCodes),
			PolicyReferences: nonNilRefs(d.PolicyReferences),
			NDBuiltinCache:   string(d.Cache),
			Ask:              d.Ask,
		},
		Intent:      newIntent,
		AuditEvents: audit,
		Grants:      grants,
		Metadata:    entryMetadata{ApproverCapable: state.ApproverCapable, Deferrals: state.Deferrals},
	}
	if s.hello.ProvenanceProducer == "deterministic" {
		entry.ProvenanceSummary = summarizeProvenance(req.paramsDoc["payload"])
	}
	entryJSON, err := json.Marshal(entry)
	if err != nil {
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, "", "internal error"), s.signer)
	}
	ev := d.EvaluatorVersion
	if ev == "" {
		ev = g.cfg.EvaluatorVersion
	}
	res := acsResult{
		Type: "final", ACSVersion: Version, RequestID: req.requestID,
		Decision: d.Disposition, Reasoning: d.Reasoning, ReasonCodes: d.ReasonCodes,
		PolicyReferences: d.PolicyReferences, PolicyData: d.PolicyData, CitedProvenanceIDs: d.CitedProvenanceIDs,
		Modifications: d.Modifications, AskDetails: d.Ask, DeferDetails: d.Defer,
		Metadata: &resultMetadata{Evaluator: "deterministic", EvaluatorVersion: ev, EvaluationDurationMS: time.Since(start).Milliseconds()},
	}
	// ACS §8.6: the answer publishes the head this entry produced, under
	// the signature, and leaves only after the ledger committed both. The
	// params go beside the entry, which holds only their hash, so that a
	// replay can rebuild the policy's input from the ledger alone.
	// The request's seen key is recorded in the same transaction, so a repeat is
	// refused before any answer leaves (ACS §10.3).
	seen := ledger.Seen{RequestID: req.requestID, Nonce: req.nonce, At: g.cfg.Clock()}
	actx, appendSpan := startAppend(ctx)
	app, out, err := g.cfg.Store.AppendRequest(actx, ledger.Record{SessionID: s.id, AgentID: s.agentID, Entry: entryJSON, Writer: ledger.WriterGuardian, Expect: s.expected()}, req.params, seen,
		func(a ledger.Appended) ([]byte, error) {
			res.ChainHash = a.EntryHash.String()
			res.PreviousChainHash = s.headAfterGrants(a.PreviousHash)
			b, err := json.Marshal(response{JSONRPC: "2.0", ID: req.id, Result: res})
			if err != nil {
				return nil, err
			}
			return sig.SignEnvelope(b, sig.Result, s.signer)
		})
	endAppend(appendSpan, app.Position, err)
	if errors.Is(err, ledger.ErrReplay) {
		// Not remembered: a refused request leaves no history of its
		// own (its request_id with a fresh nonce, say, is not a replay).
		return g.errorResponse(req.id, refuseSeenRequest(req), s.signer)
	}
	if out := g.appendRefused(ctx, req, s, err); out != nil {
		return out
	}
	if err != nil {
		if g.cfg.OnDecisionFailure == PostureDeny {
			decisionEvent(stepSpan, Decision{Disposition: Deny, ReasonCodes: []string{ReasonLedgerUnavailable}}, "")
		}
		return g.ledgerFailure(ctx, req, s, d, err)
	}
	decisionEvent(stepSpan, d, app.EntryHash.String())
	s.seen.add(req.requestID, req.nonce)
	head := app.EntryHash
	s.head, s.length = &head, app.Position+1
	if payload, ok := req.paramsDoc["payload"]; ok {
		s.prov.walk(payload)
	} else {
		s.prov.Add(req.payload)
	}
	if key == "" && d.Disposition == Ask {
		key = req.key()
	}
	s.commitStep(req.requestID, req.method, key, newIntent, d.Disposition, d.Ask)
	s.commitSkill(req.method, req.payload, d.Disposition)
	s.agentHead = &head
	if req.method == MethodSessionEnd {
		// The session is over and its chain sealed: forget its in-memory
		// state. A later handshake for it is refused (handshake.go).
		g.mu.Lock()
		delete(g.sessions, s.id)
		g.mu.Unlock()
	}
	return out
}

// ledgerFailure answers a step whose seen-request record or entry could not be
// written. Nothing
// was published, so the answer carries no chain_hash; it is a signed DENY
// under posture deny and a signed error under posture proceed (ACS §6.4),
// never an allow.
func (g *Guardian) ledgerFailure(ctx context.Context, req *request, s *session, d Decision, err error) []byte {
	g.cfg.Logger.Error("guardian: ledger failed", "session_id", s.id, "request_id", req.requestID, "err", err)
	// The append may have committed before the error reached us; re-read
	// the head so the next step is decided against what the ledger holds.
	g.resync(ctx, s)
	if g.cfg.OnDecisionFailure != PostureDeny {
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, ReasonLedgerUnavailable,
			"the step could not be recorded in the ledger; apply the negotiated on_decision_failure posture"), s.signer)
	}
	res := acsResult{
		Type: "final", ACSVersion: Version, RequestID: req.requestID, Decision: Deny,
		Reasoning:        "the step could not be recorded in the ledger and the failure posture is deny (ACS §6.4)",
		ReasonCodes:      []string{ReasonLedgerUnavailable},
		PolicyReferences: d.PolicyReferences,
	}
	return g.seal(response{JSONRPC: "2.0", ID: req.id, Result: res}, sig.Result, s.signer)
}

// decide asks the policy within the method's timeout. A panicking policy is
// a failed decision, not a dead Guardian.
func (g *Guardian) decide(ctx context.Context, method string, in Input) (d Decision, err error) {
	ctx, span := startPolicy(ctx, method)
	defer func() { endPolicy(span, d, err) }()
	ctx, cancel := context.WithTimeout(ctx, g.timeout(method))
	defer cancel()
	done := make(chan struct{})
	eval := func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				d, err = Decision{}, fmt.Errorf("policy panicked: %v", p)
			}
		}()
		d, err = g.cfg.Policy.Decide(ctx, in)
	}
	if err := g.evals.run(ctx, eval); err != nil {
		return Decision{}, fmt.Errorf("no policy evaluator was free within the decision timeout: %w", err)
	}
	<-done
	return d, err
}

func (g *Guardian) timeout(method string) time.Duration {
	if d, ok := g.cfg.PerMethodTimeout[method]; ok && d > 0 {
		return d
	}
	return g.cfg.Timeout
}

// ping answers system/ping (ACS §13): always allow, whatever the policy,
// signature or session state; never an ACS error; never chained.
func (g *Guardian) ping(req *request) []byte {
	var p struct {
		Echo *string `json:"echo"`
	}
	if err := json.Unmarshal(req.payload, &p); err != nil {
		return g.errorResponse(req.id, invalidParam("params.payload.echo", "must be a string"), nil)
	}
	payload := map[string]string{"status": "ok", "server_timestamp": g.cfg.Clock().UTC().Format(timeFormat)}
	if p.Echo != nil {
		payload["echo"] = *p.Echo
	}
	res := acsResult{Type: "final", ACSVersion: Version, RequestID: req.requestID, Decision: Allow, Payload: payload}
	return g.seal(response{JSONRPC: "2.0", ID: req.id, Result: res}, sig.Result, g.sessionSigner(req))
}

func headText(h string) string {
	if h == "" {
		return "none yet: the chain is empty"
	}
	return h
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilRefs(s []acs.PolicyReference) []acs.PolicyReference {
	if s == nil {
		return []acs.PolicyReference{}
	}
	return s
}
