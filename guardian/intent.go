package guardian

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

// Intent is the session's Intent (ACS §8.4): fixed once established by
// sessionStart or the first agentTrigger, and grown only by approver
// extensions (§9.1), which are kept apart from what the parser produced.
type Intent struct {
	Raw              string          `json:"raw,omitempty"`
	Parsed           []string        `json:"parsed,omitempty"`
	ParserProvenance json.RawMessage `json:"parser_provenance,omitempty"`
	ScopeMode        string          `json:"scope_mode,omitempty"`
	// Extensions are the approver grants with scope "session", in order.
	// Their capabilities are also appended to Parsed.
	Extensions []IntentExtension `json:"extensions,omitempty"`
}

// IntentExtension records one approver grant (ACS §9.1): its provenance is
// the approver and the ASK it answered, distinct from parser_provenance.
type IntentExtension struct {
	Capabilities []string     `json:"capabilities"`
	Approver     acs.Approver `json:"approver"`
	AskStepID    string       `json:"ask_step_id"`
	// StepID is the step_id of the intent_extension ContextEntry.
	StepID string `json:"step_id"`
}

// clone returns a deep enough copy of i for a policy to read while the
// session moves on.
func (i *Intent) clone() *Intent {
	if i == nil {
		return nil
	}
	c := *i
	c.Parsed = slices.Clone(i.Parsed)
	c.Extensions = slices.Clone(i.Extensions)
	return &c
}

// intentUpdate looks for an Intent in a step's payload. The first one, in
// sessionStart or the first agentTrigger before any content step,
// establishes the session's Intent; any other attempt to set or change it
// is ignored and reported as an audit event (ACS §8.4).
// Called with s.mu held.
func (g *Guardian) intentUpdate(req *request, s *session) (*Intent, string, *rpcerr.Error) {
	if req.method != "steps/sessionStart" && req.method != "steps/agentTrigger" {
		return nil, "", nil
	}
	p, _ := members(req.payload)
	raw, ok := p["intent"]
	if !ok {
		return nil, "", nil
	}
	var in Intent
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&in); err != nil {
		return nil, "", invalidParam("params.payload.intent", "is not an Intent object: "+err.Error())
	}
	if in.Extensions != nil {
		return nil, "", invalidParam("params.payload.intent.extensions", "is set by the Guardian from approver grants, never by the client")
	}
	if len(in.Parsed) > 0 {
		// ACS §8.4: parser_provenance is required with parsed, and its
		// origin must be user_input.
		var prov struct {
			Origin string `json:"origin"`
		}
		if len(in.ParserProvenance) == 0 || json.Unmarshal(in.ParserProvenance, &prov) != nil {
			return nil, "", invalidParam("params.payload.intent.parser_provenance", "is required when intent.parsed is present (ACS §8.4)")
		}
		if prov.Origin != "user_input" {
			return nil, "", invalidParam("params.payload.intent.parser_provenance.origin", fmt.Sprintf("must be user_input, not %q (ACS §8.4)", prov.Origin))
		}
	}
	// ACS §8.4: only sessionStart or the first agentTrigger, before any
	// content step, establishes the Intent; later ones neither set nor
	// widen it.
	if s.intent == nil && !s.intentClosed {
		return &in, "", nil
	}
	return nil, ReasonIntentImmutable, nil
}

// Approval is an approver's signed answer to an ASK (ACS §9), as submitted
// to ResolveAsk. Its signature covers the RFC 8785 form of the approval
// object without its signature member, and must be made by the key whose
// key_id is the approver's id.
type Approval struct {
	SessionID string       `json:"session_id"`
	AskStepID string       `json:"ask_step_id"`
	Approver  acs.Approver `json:"approver"`
	// Decision is allow or deny; approvers must not return ASK (§9).
	Decision        Disposition        `json:"decision"`
	IntentExtension *ApprovalExtension `json:"intent_extension,omitempty"`
	Timestamp       string             `json:"timestamp"`
	// Signature is the { algorithm, value, key_id } object SignApproval
	// adds; ResolveAsk reads it from the document itself.
	Signature json.RawMessage `json:"signature,omitempty"`
}

// ApprovalExtension is the intent_extension of an approver's grant (§9.1).
type ApprovalExtension struct {
	Capabilities []string `json:"capabilities"`
	// Scope is "this_request" or "session".
	Scope string `json:"scope"`
}

// Resolution is the outcome of ResolveAsk.
type Resolution struct {
	Decision Disposition
	// ChainHash is the session head after the resolution's entry
	// (intent_extension or ask_resolution).
	ChainHash string
}

// Errors of ResolveAsk.
var (
	ErrApprovalInvalid   = errors.New("approval is invalid")
	ErrApproverMismatch  = errors.New("approver is not the one the ASK named")
	ErrNoPendingAsk      = errors.New("no pending ASK with that step_id")
	ErrExtensionRefused  = errors.New("intent extension refused")
	ErrApprovalForged    = errors.New("approval signature does not verify")
	ErrUnknownSession    = errors.New("unknown session")
	ErrSessionSealed     = errors.New("session sealed by steps/sessionEnd")
	errApproverKeysUnset = errors.New("no approver keys configured")
)

// ResolveAsk accepts an approver's answer to an ASK the Guardian raised.
// The approver is authenticated by its signature and must be the approver
// the ASK named (ACS §9). A grant with an intent_extension of scope
// "session" appends its capabilities to Intent.parsed and writes a
// ContextEntry with step_type "intent_extension" (§9.1); scope
// "this_request" makes them available to the session's next step only.
// Under scope_mode "strict" only capabilities the ASK requested can be
// granted.
func (g *Guardian) ResolveAsk(ctx context.Context, approval []byte) (Resolution, error) {
	canon, err := acs.Canonicalize(approval)
	if err != nil {
		return Resolution{}, fmt.Errorf("%w: %v", ErrApprovalInvalid, err)
	}
	var a Approval
	if err := json.Unmarshal(canon, &a); err != nil {
		return Resolution{}, fmt.Errorf("%w: %v", ErrApprovalInvalid, err)
	}
	if err := g.checkApprovalSignature(canon, a); err != nil {
		return Resolution{}, err
	}
	if a.Decision != Allow && a.Decision != Deny {
		return Resolution{}, fmt.Errorf("%w: decision must be allow or deny, not %q (approvers must not return ASK, §9)", ErrApprovalInvalid, a.Decision)
	}
	s := g.session(a.SessionID)
	live := s != nil
	if !live {
		// After a restart or an idle eviction the approver need not wait
		// for the agent, which is paused on the ASK and may never shake
		// hands again: the session is rebuilt from the ledger, read-only,
		// as resume does, and the resolution chained onto its head.
		var err error
		if s, err = g.rebuild(ctx, a.SessionID); err != nil {
			return Resolution{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return Resolution{}, fmt.Errorf("%w: %s", ErrSessionSealed, a.SessionID)
	}
	asked, ok := s.asks[a.AskStepID]
	if !ok {
		return Resolution{}, fmt.Errorf("%w: %s in session %s", ErrNoPendingAsk, a.AskStepID, a.SessionID)
	}
	if asked.Type != a.Approver.Type || asked.ID != a.Approver.ID {
		return Resolution{}, fmt.Errorf("%w: the ASK named %s %q, the approval comes from %s %q", ErrApproverMismatch, asked.Type, asked.ID, a.Approver.Type, a.Approver.ID)
	}
	ext := a.IntentExtension
	granted := a.Decision == Allow && ext != nil && len(ext.Capabilities) > 0
	if granted {
		if ext.Scope != "session" && ext.Scope != "this_request" {
			return Resolution{}, fmt.Errorf("%w: intent_extension.scope must be this_request or session, not %q", ErrApprovalInvalid, ext.Scope)
		}
		if s.intent != nil && s.intent.ScopeMode == "strict" {
			requested := s.requested[a.AskStepID]
			for _, c := range ext.Capabilities {
				if !slices.Contains(requested, c) {
					return Resolution{}, fmt.Errorf("%w: scope_mode strict allows granting only the capabilities the ASK requested; %q was not requested", ErrExtensionRefused, c)
				}
			}
		}
	}
	// Every accepted resolution is chained, the denials too, so that the
	// ASK stays answered after a restart (resume.go).
	se, b, err := g.resolutionEntry(a, canon, granted)
	if err != nil {
		return Resolution{}, err
	}
	app, err := g.cfg.Store.Append(ctx, ledger.Record{SessionID: s.id, AgentID: s.agentID, Entry: b, Writer: ledger.WriterGuardian, Expect: s.expected()})
	if err != nil {
		if errors.Is(err, ledger.ErrHeadMoved) {
			// As for a step (guardian/cas.go): nothing was written, and
			// the next decision is made against the ledger's head.
			g.resync(ctx, s)
		}
		return Resolution{}, fmt.Errorf("couldn't record the resolution of ASK %s in session %s: %w", a.AskStepID, s.id, err)
	}
	before := s.expected()
	head := app.EntryHash
	s.head, s.length = &head, app.Position+1
	s.applyResolution(se, se.StepID)
	if !live {
		g.catchUp(s.id, before, se, app)
	}
	return Resolution{Decision: a.Decision, ChainHash: app.EntryHash.String()}, nil
}

// rebuild reads a session that is not in memory back from the ledger, as
// resume does, without registering it: it is only the state a resolution
// is checked against and chained onto.
func (g *Guardian) rebuild(ctx context.Context, id string) (*session, error) {
	stored, err := g.cfg.Store.Session(ctx, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, id)
	case err != nil:
		return nil, fmt.Errorf("couldn't load session %s: %w", id, err)
	case stored.Writer != ledger.WriterGuardian:
		return nil, fmt.Errorf("%w: %s was not written by this Guardian", ErrUnknownSession, id)
	}
	s := &session{id: id, agentID: stored.AgentID, asks: map[string]acs.Approver{}, requested: map[string][]string{}}
	if err := g.resume(ctx, s, stored); err != nil {
		return nil, err
	}
	return s, nil
}

// catchUp applies a resolution chained from a rebuilt session to the live
// session of the same id, if the agent shook hands while it was being
// made and the live session was read back before the resolution's entry
// (its head is still the one the resolution was chained onto). A live
// session read back after it already holds it.
func (g *Guardian) catchUp(id string, before *ledger.Head, se storedEntry, app ledger.Appended) {
	live := g.session(id)
	if live == nil {
		return
	}
	live.mu.Lock()
	defer live.mu.Unlock()
	if *live.expected() != *before {
		return
	}
	head := app.EntryHash
	live.head, live.length = &head, app.Position+1
	live.applyResolution(se, se.StepID)
}

// checkApprovalSignature authenticates an approval (ACS §9: approver
// authentication is required).
func (g *Guardian) checkApprovalSignature(canon []byte, a Approval) error {
	if g.cfg.ApproverKeys == nil {
		return fmt.Errorf("%w: %v", ErrApprovalForged, errApproverKeysUnset)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(canon, &top); err != nil {
		return fmt.Errorf("%w: %v", ErrApprovalInvalid, err)
	}
	var s struct {
		Algorithm string `json:"algorithm"`
		KeyID     string `json:"key_id"`
		Value     string `json:"value"`
	}
	if err := json.Unmarshal(top["signature"], &s); err != nil || s.KeyID == "" {
		return fmt.Errorf("%w: signature must be an object with algorithm, key_id and value", ErrApprovalInvalid)
	}
	if s.KeyID != a.Approver.ID {
		return fmt.Errorf("%w: signed with key_id %q, but the approver is %q", ErrApprovalForged, s.KeyID, a.Approver.ID)
	}
	k, ok := g.cfg.ApproverKeys.Get(s.KeyID)
	if !ok || string(k.Algorithm()) != s.Algorithm {
		return fmt.Errorf("%w: no approver key %q for algorithm %q", ErrApprovalForged, s.KeyID, s.Algorithm)
	}
	value, err := base64.StdEncoding.DecodeString(s.Value)
	if err != nil {
		return fmt.Errorf("%w: signature value is not base64", ErrApprovalInvalid)
	}
	delete(top, "signature")
	unsigned, _ := json.Marshal(top)
	input, err := acs.Canonicalize(unsigned)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrApprovalInvalid, err)
	}
	v, err := k.Verifier(a.SessionID)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrApprovalForged, err)
	}
	if err := v.Verify(input, value); err != nil {
		return fmt.Errorf("%w: %v", ErrApprovalForged, err)
	}
	return nil
}

// SignApproval signs an approval object for ResolveAsk with an approver's
// key (the Signature member is replaced). Approver tools and tests use it.
func SignApproval(a Approval, s sig.Signer) ([]byte, error) {
	a.Signature = nil
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(b, &top)
	delete(top, "signature")
	unsigned, _ := json.Marshal(top)
	input, err := acs.Canonicalize(unsigned)
	if err != nil {
		return nil, err
	}
	v, err := s.Sign(input)
	if err != nil {
		return nil, err
	}
	sb, _ := json.Marshal(sig.Signature{Algorithm: s.Algorithm(), KeyID: s.KeyID(), Value: v})
	top["signature"] = sb
	out, _ := json.Marshal(top)
	return acs.Canonicalize(out)
}
