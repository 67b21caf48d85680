package guardian

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

// clientHello is handshake.json $defs/ClientHello. Unknown members are
// ignored (ACS §4).
type clientHello struct {
	ACSVersionsSupported []string `json:"acs_versions_supported"`
	MethodsImplemented   []string `json:"methods_implemented"`
	TransportsSupported  []string `json:"transports_supported"`
	MaxPayloadSizeBytes  int64    `json:"max_payload_size_bytes"`
	ProvenanceProducer   string   `json:"provenance_producer"`
	WrappedProtocols     []struct {
		Protocol string `json:"protocol"`
		Version  string `json:"version"`
	} `json:"wrapped_protocols"`
	ProfilesSupported []string `json:"profiles_supported"`
	// ModifySupported is acsledger's ClientHello member by which a client
	// declares it cannot apply MODIFY (false); absent means it can, unless
	// the deployment says otherwise (§6.5, docs/conformance.md,
	// "Divergences").
	ModifySupported *bool `json:"modify_supported"`
}

// serverHello is handshake.json $defs/ServerHello.
type serverHello struct {
	NegotiatedVersion            string        `json:"negotiated_version"`
	MethodsEvaluated             []string      `json:"methods_evaluated"`
	SelectedTransport            string        `json:"selected_transport"`
	SignatureAlgorithmsSupported []string      `json:"signature_algorithms_supported"`
	TimeoutConfig                timeoutConfig `json:"timeout_config"`
	// OnDecisionFailure is the §4/§6.4 name; OnTimeout carries the same
	// posture under the name the published handshake.json uses.
	OnDecisionFailure        string        `json:"on_decision_failure"`
	OnTimeout                string        `json:"on_timeout"`
	SkewWindowMS             int64         `json:"skew_window_ms"`
	ApproverTypesSupported   []string      `json:"approver_types_supported"`
	PolicyRequiresProvenance bool          `json:"policy_requires_provenance"`
	TraceEmission            traceEmission `json:"trace_emission"`
	ProfilesAccepted         []string      `json:"profiles_accepted"`

	// AgbomSerializations is agbom_serializations_supported (§4): the
	// Guardian records the canonical AgBOM as received and renders no
	// other serialization, so it claims no ACS-Inspect.
	AgbomSerializations []string `json:"agbom_serializations_supported"`
}

type timeoutConfig struct {
	DefaultMS   int64            `json:"default_ms"`
	PerMethodMS map[string]int64 `json:"per_method_ms,omitempty"`
}

type traceEmission struct {
	OTelEnabled bool `json:"otel_enabled"`
	OCSFEnabled bool `json:"ocsf_enabled"`
}

// hello answers handshake/hello (ACS §4) and binds the session to the agent
// and the key that signed the ClientHello.
func (g *Guardian) hello(ctx context.Context, req *request, transport string) []byte {
	var ch clientHello
	if err := json.Unmarshal(req.payload, &ch); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return g.errorResponse(req.id, invalidParam("params.payload."+te.Field, "has the wrong type: "+te.Value+" where "+te.Type.String()+" was expected"), nil)
		}
		return g.errorResponse(req.id, invalidParam("params.payload", err.Error()), nil)
	}
	if ch.ACSVersionsSupported == nil || ch.MethodsImplemented == nil || ch.TransportsSupported == nil || ch.ProvenanceProducer == "" {
		return g.errorResponse(req.id, invalidParam("params.payload", "must carry acs_versions_supported, methods_implemented, transports_supported and provenance_producer (ClientHello)"), nil)
	}
	negotiated := ""
	for _, v := range ch.ACSVersionsSupported {
		if compatible(v) {
			negotiated = Version
			break
		}
	}
	if negotiated == "" || !compatible(req.acsVersion) {
		return g.errorResponse(req.id, refuse(rpcerr.UnsupportedVersion, "no_common_version",
			fmt.Sprintf("no ACS version in common: the client supports %v, this Guardian speaks %s", ch.ACSVersionsSupported, Version),
			"supported_versions", []string{Version}), nil)
	}

	keyID, signer, e := g.authenticate(req, nil)
	if e != nil {
		return g.errorResponse(req.id, e, nil)
	}
	if e := g.checkFresh(req); e != nil {
		return g.errorResponse(req.id, e, signer)
	}
	if ch.ProvenanceProducer == "none" && g.cfg.RequireProvenance {
		return g.errorResponse(req.id, refuse(rpcerr.ProvenanceRequired, "provenance_required",
			`this Guardian's policy requires provenance (policy_requires_provenance: true) and the client declared provenance_producer "none" (ACS §4)`), signer)
	}
	if !slices.Contains(ch.TransportsSupported, transport) {
		return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, "transport_not_supported",
			fmt.Sprintf("the handshake arrived over %s, which the client's transports_supported %v does not list", transport, ch.TransportsSupported)), signer)
	}
	if g.cfg.AdmitAgent != nil {
		if err := g.cfg.AdmitAgent(req.agentID); err != nil {
			return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, "agent_refused",
				fmt.Sprintf("agent %q is refused: %v", req.agentID, err)), signer)
		}
	}

	s := &session{
		id: req.sessionID, agentID: req.agentID, keyID: keyID, hello: ch,
		signer: signer, transport: transport, asks: map[string]acs.Approver{}, requested: map[string][]string{},
		modifyCapable: g.modifyCapable(req.agentID, ch),
	}
	for _, w := range ch.WrappedProtocols {
		if w.Protocol == "MCP" {
			s.mcpVersions = append(s.mcpVersions, w.Version)
		}
	}
	// A Guardian that restarted picks the chain up where the ledger has it.
	stored, err := g.cfg.Store.Session(ctx, req.sessionID)
	switch {
	case err == nil:
		if stored.AgentID != "" && stored.AgentID != req.agentID {
			return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, "session_agent_mismatch",
				fmt.Sprintf("session %s belongs to another agent", req.sessionID)), signer)
		}
		if stored.Writer != ledger.WriterGuardian {
			return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, ReasonForeignSession,
				fmt.Sprintf("session %s was written outside this Guardian and accepts no Guardian entry; start a new session", req.sessionID)), signer)
		}
		// Everything that decides later steps is rebuilt from the
		// chain, so a restart or an idle eviction changes no decision.
		if err := g.resume(ctx, s, stored); err != nil {
			g.cfg.Logger.Error("guardian: couldn't resume session", "session_id", req.sessionID, "err", err)
			return g.errorResponse(req.id, refuse(rpcerr.InternalError, ReasonLedgerUnavailable, "the session's chain could not be read back"), signer)
		}
		if s.sealed {
			// ACS hooks, sessionEnd: "The Guardian seals the chain at
			// this point." The ledger says so after any restart.
			return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, ReasonSessionSealed,
				fmt.Sprintf("session %s ended with steps/sessionEnd, which sealed its chain; it cannot be resumed, start a new session", req.sessionID)), signer)
		}
		if s.boundKey != "" && s.boundKey != keyID {
			// ACS §10: the session stays bound to the key that signed its
			// requests, across restarts; another trusted key naming the
			// same agent does not take it over.
			return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, "session_bound_elsewhere",
				fmt.Sprintf("session %s is bound to the key that signed its recorded requests, not to key_id %q", req.sessionID, keyID)), signer)
		}
	case errors.Is(err, ledger.ErrNotFound):
	default:
		g.cfg.Logger.Error("guardian: couldn't load session", "session_id", req.sessionID, "err", err)
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, ReasonLedgerUnavailable, "the ledger could not be read"), signer)
	}

	// Replay history is recorded last, so a refused hello can be retried
	// with the same request_id once the client fixes what was refused.
	if e, err := g.recordRequest(ctx, req); err != nil {
		g.cfg.Logger.Error("guardian: couldn't record request", "session_id", req.sessionID, "err", err)
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, ReasonLedgerUnavailable, "the replay history could not be written"), signer)
	} else if e != nil {
		return g.errorResponse(req.id, e, signer)
	}

	g.mu.Lock()
	g.sweep()
	if old, ok := g.sessions[req.sessionID]; ok {
		g.mu.Unlock()
		reason := "session_already_established"
		if old.agentID != req.agentID || old.keyID != keyID {
			reason = "session_bound_elsewhere"
		}
		return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, reason,
			fmt.Sprintf("session %s already completed its handshake; renegotiation is deferred to ACS v0.2 (§4.1), start a new session", req.sessionID)), signer)
	}
	s.lastUsed.Store(g.cfg.Clock().UnixNano())
	g.sessions[req.sessionID] = s
	g.mu.Unlock()

	sh := serverHello{
		NegotiatedVersion:            negotiated,
		MethodsEvaluated:             []string{},
		SelectedTransport:            transport,
		SignatureAlgorithmsSupported: g.algs,
		TimeoutConfig:                timeoutConfig{DefaultMS: g.cfg.Timeout.Milliseconds()},
		OnDecisionFailure:            g.cfg.OnDecisionFailure,
		OnTimeout:                    g.cfg.OnDecisionFailure,
		SkewWindowMS:                 g.cfg.SkewWindow.Milliseconds(),
		ApproverTypesSupported:       append([]string{}, g.cfg.ApproverTypes...),
		PolicyRequiresProvenance:     g.cfg.RequireProvenance,
		ProfilesAccepted:             g.profiles(ch, s),
		AgbomSerializations:          []string{"canonical"},
		// ACS §4: whether the Guardian emits OTel for the Trace pillar
		// (--acs-trace, Config.TraceSteps); it emits no OCSF itself.
		TraceEmission: traceEmission{OTelEnabled: g.cfg.TraceSteps},
	}
	s.strictProvenance = slices.Contains(sh.ProfilesAccepted, "acs-provenance")
	for m, d := range g.cfg.PerMethodTimeout {
		if sh.TimeoutConfig.PerMethodMS == nil {
			sh.TimeoutConfig.PerMethodMS = map[string]int64{}
		}
		sh.TimeoutConfig.PerMethodMS[m] = max(d.Milliseconds(), 1)
	}
	for _, m := range ch.MethodsImplemented {
		if _, ok := lookupMethod(m); ok || implementedPattern(m) {
			sh.MethodsEvaluated = append(sh.MethodsEvaluated, m)
		}
	}
	g.cfg.Logger.Info("guardian: session established", "session_id", s.id, "agent_id", s.agentID, "key_id", keyID, "transport", transport)
	return g.seal(response{JSONRPC: "2.0", ID: req.id, Result: sh}, sig.Result, signer)
}

// implementedPattern reports whether a methods_implemented entry is a
// "prefix/*" pattern naming a namespace the Guardian evaluates.
func implementedPattern(m string) bool {
	return m == "steps/*" || m == "protocols/MCP/*" || m == "agbom/*"
}

// profiles selects profiles_accepted: the client's profiles this Guardian
// implements for the session (ACS §4). acs-audit is accepted for a client
// that produces provenance: every entry carries request_hash (§8.1, the
// MUST) and provenance_summary (the SHOULD), which a session without
// provenance cannot fill. acs-provenance is accepted for a client whose
// provenance_producer is deterministic (conformance, ACS-Provenance), and
// then its payloads are held to the strict schemas (checkProvenance);
// acs-crypto only when the keys support what the profile requires
// (cryptoProfile).
func (g *Guardian) profiles(ch clientHello, s *session) []string {
	ours := []string{"acs-core"}
	if ch.ProvenanceProducer == "deterministic" {
		ours = append(ours, "acs-audit", "acs-provenance")
	}
	if g.cryptoProfile(s.signer) {
		ours = append(ours, "acs-crypto")
	}
	if len(ch.ProfilesSupported) == 0 {
		return []string{"acs-core"}
	}
	out := []string{}
	for _, p := range ch.ProfilesSupported {
		if slices.Contains(ours, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// authenticate verifies a request's signature (ACS §10) and returns the
// key_id it was made with and the signer of the session's responses. With
// a bound session it also requires the key_id bound at handshake.
func (g *Guardian) authenticate(req *request, s *session) (string, sig.Signer, *rpcerr.Error) {
	got, err := sig.VerifyEnvelope(req.raw, g.keys, req.sessionID)
	if err != nil {
		return "", nil, signatureError(err)
	}
	if s != nil {
		if got.KeyID != s.keyID {
			return "", nil, refuse(rpcerr.SignatureInvalid, "key_not_bound",
				fmt.Sprintf("the request is signed with key_id %q, but session %s is bound to key_id %q at handshake", got.KeyID, s.id, s.keyID))
		}
		return got.KeyID, s.signer, nil
	}
	if got.Algorithm == sig.HMACSHA256 {
		if k, ok := g.hmacKeys[got.KeyID]; ok {
			signer, err := k.Signer(req.sessionID)
			if err != nil {
				return "", nil, refuse(rpcerr.InternalError, "", "internal error")
			}
			return got.KeyID, signer, nil
		}
	}
	signer := g.defaultSigner()
	if signer == nil {
		return "", nil, refuse(rpcerr.SessionRefused, "no_response_key",
			fmt.Sprintf("this Guardian holds no key to sign responses for a session signed with key_id %q", got.KeyID))
	}
	return got.KeyID, signer, nil
}

// signatureError maps a failed verification to SIGNATURE_INVALID, keeping
// the cause as data.reason.
func signatureError(err error) *rpcerr.Error {
	reason := "signature_invalid"
	switch {
	case errors.Is(err, sig.ErrMissingSignature):
		reason = "signature_missing"
	case errors.Is(err, sig.ErrMalformedSignature):
		reason = "signature_malformed"
	case errors.Is(err, sig.ErrUnknownKey):
		reason = "unknown_key_id"
	case errors.Is(err, sig.ErrAlgorithmMismatch):
		reason = "algorithm_mismatch"
	case errors.Is(err, sig.ErrBadSignature):
		reason = "signature_mismatch"
	}
	return refuse(rpcerr.SignatureInvalid, reason, err.Error())
}
