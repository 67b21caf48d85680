package guardian

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// Session state lives in the ledger, not only in memory: every fact that
// changes a later decision (the Intent and its extensions, the deferral
// count, pending ASKs and their requested capabilities, this_request
// grants, whether the Intent may still be established, the provenance of
// earlier steps, the head last published to the agent) is recorded in the
// session's entries or in the params stored beside them. A Guardian that
// restarted, or that forgot an idle session, rebuilds it from there when
// the session's agent shakes hands again, so that neither changes any
// decision (ACS §8.4: Intent is immutable; §6: deferrals are bounded per
// session).

// storedEntry is what resume reads of one of the Guardian's own entries:
// a step's (it has a decision) or an approver resolution's (it has an
// ask_step_id).
type storedEntry struct {
	StepType    string         `json:"step_type"`
	StepID      string         `json:"step_id"`
	RequestHash string         `json:"request_hash"`
	Intent      *Intent        `json:"intent"`
	Decision    *entryDecision `json:"decision"`
	// Resolution entries (resolution.go).
	AskStepID    string       `json:"ask_step_id"`
	Approver     acs.Approver `json:"approver"`
	Capabilities []string     `json:"capabilities"`
	Scope        string       `json:"scope"`
}

// resume rebuilds s's state from its chain in the ledger. stored is the
// session as Store.Session returned it; the entries read must end at its
// head, or the chain moved while it was read and resume fails.
func (g *Guardian) resume(ctx context.Context, s *session, stored ledger.Session) error {
	var pos int64
	var last acs.Hash
	for pos < stored.Length {
		page, err := g.cfg.Store.Entries(ctx, s.id, pos, ledger.MaxPageSize)
		if err != nil {
			return fmt.Errorf("couldn't read the entries of session %s: %w", s.id, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Position >= stored.Length {
				break
			}
			if err := g.replayEntry(ctx, s, e); err != nil {
				return err
			}
			last = e.EntryHash
			pos = e.Position + 1
		}
	}
	if pos != stored.Length || last != stored.Head {
		return fmt.Errorf("couldn't rebuild session %s: read %d entries ending at %s, the session has %d ending at %s", s.id, pos, last, stored.Length, stored.Head)
	}
	head := stored.Head
	s.head, s.length = &head, stored.Length
	return nil
}

// replayEntry applies one stored entry to s, as committing it did.
func (g *Guardian) replayEntry(ctx context.Context, s *session, e ledger.Entry) error {
	var se storedEntry
	if err := json.Unmarshal(e.Content, &se); err != nil {
		return fmt.Errorf("couldn't read entry %d of session %s: %w", e.Position, s.id, err)
	}
	if se.AskStepID != "" && se.Decision == nil {
		s.applyResolution(se, e.StepID)
		return nil
	}
	if se.Decision == nil {
		// Not written by this Guardian (an ingested chain): it decides
		// nothing here.
		return nil
	}
	var payload json.RawMessage
	params, err := g.cfg.Store.Request(ctx, s.id, e.Position)
	switch {
	case err == nil:
		var p struct {
			Payload   json.RawMessage `json:"payload"`
			Signature struct {
				KeyID string `json:"key_id"`
			} `json:"signature"`
		}
		if json.Unmarshal(params, &p) == nil {
			payload = p.Payload
			if s.boundKey == "" {
				// ACS §10: the session is bound to the key that signed
				// its requests; the ledger keeps it across restarts.
				s.boundKey = p.Signature.KeyID
			}
		}
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrErased):
		// Erased params take their provenance with them; the policy
		// sees what the ledger still holds.
	default:
		return fmt.Errorf("couldn't read the params of entry %d of session %s: %w", e.Position, s.id, err)
	}
	if payload != nil {
		s.prov.Add(payload)
	}
	published := e.EntryHash
	key := ""
	if payload != nil {
		key = requestKey(se.StepType, payload)
	}
	s.commitStep(se.StepID, se.StepType, key, se.Intent, se.Decision.Disposition, se.Decision.Ask)
	s.commitSkill(se.StepType, payload, se.Decision.Disposition)
	s.agentHead = &published
	return nil
}

// commitStep updates s after a step's entry is committed, live or read
// back from the ledger: the one place the two must agree. key is the
// step's requestKey ("" when its payload is not at hand). (The step's
// provenance is added by the caller, from the payload it has at hand.)
func (s *session) commitStep(stepID, method, key string, intent *Intent, d Disposition, ask *acs.AskDetails) {
	s.grants = slices.DeleteFunc(s.grants, func(gr grant) bool { return gr.request == key })
	if method == MethodSessionEnd {
		s.sealed = true
	}
	if d == Defer {
		s.deferrals++
	}
	if intent != nil {
		s.intent = intent
	}
	if !intentOpener(method) || intent != nil {
		s.intentClosed = true
	}
	if d == Ask && ask != nil {
		s.asks[stepID] = ask.Approver
		s.requested[stepID] = slices.Clone(ask.RequestedCapabilities)
		if key != "" {
			if s.askRequests == nil {
				s.askRequests = map[string]string{}
			}
			s.askRequests[stepID] = key
		}
	}
}

// grant is an approver's grant of scope this_request (§9.1): its
// capabilities apply to the in-flight request it answers only, the request
// the ASK paused, which the agent sends again once the ASK is resolved.
// request is that request's requestKey.
type grant struct {
	capabilities []string
	request      string
}

// requestKey identifies a request for a this_request grant: its method
// and the SHA-256 of the RFC 8785 form of its payload, so that the agent's
// new submission of the paused request (new request_id, timestamp, nonce
// and signature) matches and any other request does not. "" when the
// payload has no canonical form; it matches nothing.
func requestKey(method string, payload json.RawMessage) string {
	c, err := acs.Canonicalize(payload)
	if err != nil {
		return ""
	}
	return method + " " + acs.Hash(sha256.Sum256(c)).String()
}

// key is the request's requestKey, from the canonical form of its params
// when serve made one.
func (req *request) key() string {
	if p := acs.CanonicalMember(req.canonParams, "payload"); p != nil {
		return req.method + " " + acs.Hash(sha256.Sum256(p)).String()
	}
	return requestKey(req.method, req.payload)
}

// grantsFor returns the capabilities granted for the request key.
func (s *session) grantsFor(key string) []string {
	var caps []string
	for _, gr := range s.grants {
		if key != "" && gr.request == key {
			caps = append(caps, gr.capabilities...)
		}
	}
	return caps
}

// applyResolution updates s after an approver's resolution entry: the ASK
// is answered, and a grant extends the Intent (scope session) or the next
// step's grants (scope this_request).
func (s *session) applyResolution(se storedEntry, stepID string) {
	request := s.askRequests[se.AskStepID]
	delete(s.asks, se.AskStepID)
	delete(s.requested, se.AskStepID)
	delete(s.askRequests, se.AskStepID)
	if se.StepType != StepIntentExtension || len(se.Capabilities) == 0 {
		return
	}
	if se.Scope != "session" {
		// ACS §9.1: this_request capabilities apply only to the
		// in-flight request; a grant whose request is unknown (its params
		// were erased) applies to none.
		if request != "" {
			s.grants = append(s.grants, grant{capabilities: slices.Clone(se.Capabilities), request: request})
		}
		return
	}
	s.intent = s.intent.Extend(IntentExtension{Capabilities: se.Capabilities, Approver: se.Approver, AskStepID: se.AskStepID, StepID: stepID})
}

// Extend returns a copy of i (an empty Intent when i is nil) grown by an
// approver's grant of scope session (§9.1): the capabilities appended to
// Parsed, and the grant recorded in Extensions, apart from
// parser_provenance. The Guardian and replay (guardian/replay) grow the
// Intent with it alike.
func (i *Intent) Extend(ext IntentExtension) *Intent {
	in := i.clone()
	if in == nil {
		in = &Intent{}
	}
	in.Parsed = append(in.Parsed, ext.Capabilities...)
	in.Extensions = append(in.Extensions, ext)
	return in
}

// intentOpener reports whether a step leaves the Intent open to be
// established: sessionStart, and the Inspect-pillar snapshot that comes
// between it and the first agentTrigger (ACS hooks: agbom/snapshot fires
// after sessionStart and before agentTrigger). Any other step, and the
// first agentTrigger whether or not it carried one, closes it (§8.4: the
// Intent is established by sessionStart or the first agentTrigger).
func intentOpener(method string) bool {
	return method == "steps/sessionStart" || method == MethodAgbomSnapshot
}
