package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// A HeadChecker checks the chain heads a Guardian published (ACS §8.6):
// each signed response carries, under its signature, the chain_hash its
// step's entry produced. A chain rewritten from some entry on and re-hashed
// forward passes every chain check; only these published heads expose it.
//
// Call AddResponse for each response envelope before CheckEntry for the
// entry of its step (all responses first, or each step's response just
// before its entry), CheckEntry for every entry in chain order with the head
// the chain check recomputed there, then Finish. Until its entry is
// checked, it keeps per response carrying a chain_hash its request_id and
// 32-byte head (about 300 bytes at peak heap); no envelope is kept after AddResponse
// returns, and nothing of a response once its entry is checked.
//
// A HeadChecker is not safe for concurrent use.
type HeadChecker struct {
	keys      *sig.KeySet
	sessionID string
	// hmacGiven says keys holds an HMAC-SHA256 secret. Once one is given,
	// an HMAC signature by another key_id is a failure, not a notice: the
	// auditor holds the Guardian's secrets.
	hmacGiven bool
	responses int

	// verifiers holds the verifier of each key used so far.
	verifiers map[*sig.PublicKey]sig.Verifier

	// published maps request_id to the heads the responses for it carry,
	// until the entry of that step is checked.
	published map[string]*publishedHead
	// waiting counts the responses recorded in published.
	waiting int

	// held keeps the findings about responses that name a request_id
	// until the entry they answer is checked, which gives them its
	// entry_index; Finish returns those that answer no entry.
	held map[string][]Finding
	// line is the 1-based input line of the response being added, 0
	// when the responses are not read from lines; findings name it.
	line int
	// heldOrder is the order the request_ids of held were first seen.
	heldOrder []string

	// diverged is true while the last published head compared differed:
	// a rewrite changes every head after it, and is reported once, at the
	// first point of divergence.
	diverged bool

	// authors, set by RequireSignedHeads, are the keys whose signature on
	// a head tells a third party who issued it. unbound is the run of
	// entries, from the last head they signed on, that no such head binds
	// yet; lastIndex is the index of the last entry checked.
	authors   *sig.KeySet
	unbound   *unboundRun
	lastIndex int
}

// headAuth says what a response's signature shows about who published its
// head, for RequireSignedHeads; label is its algorithm/key_id.
type headAuth struct {
	kind  authKind
	label string
}

type authKind uint8

const (
	authNone         authKind = iota // no response publishes the head
	authInvalid                      // unsigned, or the signature fails
	authHMACNotGiven                 // HMAC-SHA256, its IKM or session id not given
	authHMAC                         // HMAC-SHA256, verified with a given IKM
	authUntrusted                    // asymmetric, by a key the verifier did not give
	authTrusted                      // asymmetric, by a key of the verifier's authors
)

// unboundRun is the first entry that no head signed by an author binds,
// and what signed the heads published from it on.
type unboundRun struct {
	index           int
	entryID, stepID string
	responses       int      // steps from index on that have a response
	auth            headAuth // the first of those responses'
}

type publishedHead struct {
	response int // 0-based index of the first response for this request
	heads    []acs.Hash
	// prevs are the previous_chain_hash members the responses carry: the
	// head the step's entry was chained onto, published when entries the
	// Guardian wrote on its own (approver resolutions) came between.
	prevs []acs.Hash
	// With RequireSignedHeads: authentic says a response for the step is
	// signed by an author; auth is what signed its first response.
	authentic bool
	auth      headAuth
}

// note records what signed one response for the step.
func (p *publishedHead) note(a headAuth) {
	if p.auth.kind == authNone {
		p.auth = a
	}
	p.authentic = p.authentic || a.kind == authTrusted
}

// NewHeadChecker returns a HeadChecker that verifies response signatures
// against keys. sessionID is the session the responses belong to, from
// which HMAC-SHA256 session keys are derived; it may be "" when no response
// is HMAC-signed. keys must not change while the HeadChecker is in use.
func NewHeadChecker(keys *sig.KeySet, sessionID string) *HeadChecker {
	if keys == nil {
		keys = new(sig.KeySet)
	}
	h := &HeadChecker{keys: keys, sessionID: sessionID, published: make(map[string]*publishedHead), held: make(map[string][]Finding), verifiers: make(map[*sig.PublicKey]sig.Verifier)}
	for _, id := range keys.KeyIDs() {
		if k, _ := keys.Get(id); k.Algorithm().Symmetric() {
			h.hmacGiven = true
		}
	}
	return h
}

// RequireSignedHeads makes the checker fail a session whose entries are not
// all bound by a head signed with one of authors' asymmetric keys: Finish
// then reports head_unauthenticated at the first entry that no such head,
// published for it or for any entry after it, binds (a head commits to every
// entry before it). An HMAC-SHA256 head never counts, even when its IKM is
// in the checker's keys: ACS §8.6 bounds the HMAC baseline to "a key-holder
// can verify the chain" and leaves non-repudiation to asymmetric keys, since
// whoever holds the secret (the Guardian's operator, and anyone it gave the
// secret to) can sign a rewritten head. Nor does an asymmetric key that
// authors do not hold, such as one the evidence carries itself.
//
// authors are the keys the verifier itself trusts, usually the checker's own
// key set; call RequireSignedHeads before the first AddResponse.
func (h *HeadChecker) RequireSignedHeads(authors *sig.KeySet) {
	if authors == nil {
		authors = new(sig.KeySet)
	}
	h.authors = authors
}

// authOf says what the verified signature s shows about who signed.
func (h *HeadChecker) authOf(s *sig.Signature) headAuth {
	a := headAuth{kind: authUntrusted, label: string(s.Algorithm) + "/" + s.KeyID}
	if s.Algorithm.Symmetric() {
		a.kind = authHMAC
		return a
	}
	author, ok := h.authors.Get(s.KeyID)
	used, _ := h.keys.Get(s.KeyID)
	if ok && used != nil && author.Algorithm() == s.Algorithm && author.Equal(used) {
		a.kind = authTrusted
	}
	return a
}

// AddResponse checks one signed response envelope, exactly as sent, and
// records the chain_hash it publishes. It returns the notices about the
// response (unverifiable_hmac), which are not failures, and the findings
// about the response itself (response_signature_invalid) when it names no
// request_id. The findings about a response that names one are held until
// the entry it answers (step_id = request_id) is checked: CheckEntry
// returns them with that entry's index, and Finish those that answer no
// entry, with entry_index -1. A response that is not a JSON-RPC response
// at all is an error, not a finding.
func (h *HeadChecker) AddResponse(envelope []byte) (findings, notices []Finding, err error) {
	findings, notices, err = h.addResponse(envelope)
	if err != nil || len(findings) == 0 || findings[0].StepID == "" {
		return findings, notices, err
	}
	id := findings[0].StepID
	if _, ok := h.held[id]; !ok {
		h.heldOrder = append(h.heldOrder, id)
	}
	h.held[id] = append(h.held[id], findings...)
	return nil, notices, nil
}

func (h *HeadChecker) addResponse(envelope []byte) (findings, notices []Finding, err error) {
	i := h.responses
	h.responses++
	rf, signed, verr, err := h.check(envelope)
	if err != nil {
		return nil, nil, fmt.Errorf("response %d: %w", i, err)
	}
	mk := func(code, expected, actual, msg string) Finding {
		where := fmt.Sprintf("response %d", i)
		if h.line > 0 {
			where = fmt.Sprintf("%s (line %d)", where, h.line)
		}
		return Finding{Code: code, EntryIndex: -1, StepID: rf.requestID, Where: where, Expected: expected, Actual: actual, Message: msg}
	}

	trusted := verr == nil
	var auth headAuth // for RequireSignedHeads
	if verr == nil && h.authors != nil {
		auth = h.authOf(signed)
	}
	if verr != nil {
		var se *sig.Error
		switch {
		case errors.As(verr, &se) && errors.Is(verr, sig.ErrUnknownKey) && se.Algorithm == sig.HMACSHA256 && !h.hmacGiven:
			notices = append(notices, mk(CodeUnverifiableHMAC, "", se.KeyID,
				fmt.Sprintf("The response is signed with HMAC-SHA256 key %q, whose secret was not given, so its signature was not checked.", se.KeyID)))
			trusted = true // its chain_hash is still compared, unauthenticated
			auth = headAuth{authHMACNotGiven, sigLabel(se)}
		case errors.Is(verr, sig.ErrSessionRequired):
			notices = append(notices, mk(CodeUnverifiableHMAC, "", keyIDOf(se),
				"The response is signed with HMAC-SHA256, but no session id was given to derive the session key from, so its signature was not checked."))
			trusted = true
			auth = headAuth{authHMACNotGiven, sigLabel(se)}
		case errors.Is(verr, sig.ErrMalformedEnvelope) || errors.Is(verr, sig.ErrNotEnvelope):
			return nil, nil, fmt.Errorf("response %d: %w", i, verr)
		default:
			findings = append(findings, mk(CodeResponseSignatureInvalid, "a valid signature", sigLabel(se),
				fmt.Sprintf("The response's signature check failed: %s.", sigCause(verr))))
			auth = headAuth{authInvalid, sigLabel(se)}
		}
	}
	if !rf.result || rf.chainHash == nil || rf.requestID == "" {
		// An error response or a response for a step that wrote no
		// entry: it publishes no head.
		return findings, notices, nil
	}
	if !trusted {
		// Its head is not to be trusted, but its step did get a
		// response: the entry is not also reported as without one.
		p := h.record(rf.requestID, i)
		if h.authors != nil {
			p.note(auth)
		}
		return findings, notices, nil
	}
	head, err := acs.ParseHash(*rf.chainHash)
	if err != nil {
		return nil, nil, fmt.Errorf("response %d: result.chain_hash: %w", i, err)
	}
	p := h.record(rf.requestID, i)
	p.heads = append(p.heads, head)
	if h.authors != nil {
		p.note(auth)
	}
	if rf.prevHash != nil {
		prev, err := acs.ParseHash(*rf.prevHash)
		if err != nil {
			return nil, nil, fmt.Errorf("response %d: result.previous_chain_hash: %w", i, err)
		}
		p.prevs = append(p.prevs, prev)
	}
	h.waiting++
	return findings, notices, nil
}

// responseFields are the members of a response the head check reads.
type responseFields struct {
	result    bool // result is an object
	requestID string
	chainHash *string
	prevHash  *string // previous_chain_hash
	// methodOrError says the envelope has a method or an error member,
	// so that sig.MemberOf does not classify it as signed in result.
	methodOrError bool
}

// check reads the envelope's result.request_id and result.chain_hash and
// verifies its signature: verr is what sig.VerifyEnvelope returns, signed
// the signature when it verified. err says the envelope could not be read.
//
// A signed result that verifies is checked from one canonicalization:
// sig.Split's output is canonical and is the signed input. Everything else
// (error responses, signatures that fail, keys not given) goes to
// sig.VerifyEnvelope, whose error says why.
func (h *HeadChecker) check(envelope []byte) (rf responseFields, signed *sig.Signature, verr, err error) {
	input, s, serr := sig.Split(envelope, sig.Result)
	if serr == nil {
		if rf, err = readResponseFields(input); err != nil {
			return rf, nil, nil, err
		}
		// Signed in result, as sig.MemberOf classifies it, and verified.
		if !rf.methodOrError && s != nil && h.verifies(input, s) {
			return rf, s, nil, nil
		}
		signed, verr = sig.VerifyEnvelope(envelope, h.keys, h.sessionID)
		return rf, signed, verr, nil
	}
	canon, err := acs.Canonicalize(envelope)
	if err != nil {
		return rf, nil, nil, &sig.Error{Kind: sig.ErrMalformedEnvelope, Err: err}
	}
	if rf, err = readResponseFields(canon); err != nil {
		return rf, nil, nil, err
	}
	signed, verr = sig.VerifyEnvelope(envelope, h.keys, h.sessionID)
	return rf, signed, verr, nil
}

// verifies reports whether s, by a key of h.keys, verifies input. The
// verifier of each key is made once: for HMAC-SHA256, making it derives
// the session key.
func (h *HeadChecker) verifies(input []byte, s *sig.Signature) bool {
	k, ok := h.keys.Get(s.KeyID)
	if !ok || k.Algorithm() != s.Algorithm {
		return false
	}
	v, ok := h.verifiers[k]
	if !ok {
		var err error
		if v, err = k.Verifier(h.sessionID); err != nil {
			return false
		}
		h.verifiers[k] = v
	}
	return v.Verify(input, s.Value) == nil
}

// readResponseFields reads result.request_id and result.chain_hash from a
// canonical envelope. result must be an object or null, and each of the
// two a string or null, if present.
func readResponseFields(canon []byte) (responseFields, error) {
	var rf responseFields
	if len(canon) == 0 {
		return rf, errors.New("empty response")
	}
	if canon[0] != '{' {
		return rf, fmt.Errorf("a response is a JSON object, not %s", kindOrChar(canon[0]))
	}
	var result []byte
	acs.CanonicalMembers(canon, func(key, v []byte) bool {
		switch string(key) {
		case "result":
			result = v
		case "method", "error":
			rf.methodOrError = true
		}
		return true
	})
	if result == nil || string(result) == "null" {
		return rf, nil
	}
	if result[0] != '{' {
		return rf, fmt.Errorf("result is %s, want an object", kindOrChar(result[0]))
	}
	rf.result = true
	var err error
	acs.CanonicalMembers(result, func(key, v []byte) bool {
		if string(key) != "request_id" && string(key) != "chain_hash" && string(key) != "previous_chain_hash" || string(v) == "null" {
			return true
		}
		str, ok := canonicalString(v)
		switch {
		case !ok:
			err = fmt.Errorf("result.%s is %s, want a string", key, kindOrChar(v[0]))
		case string(key) == "request_id":
			rf.requestID = str
		case string(key) == "previous_chain_hash":
			rf.prevHash = &str
		default:
			rf.chainHash = &str
		}
		return err == nil
	})
	return rf, err
}

// record returns the record of a request's published heads, making it.
func (h *HeadChecker) record(requestID string, response int) *publishedHead {
	p := h.published[requestID]
	if p == nil {
		p = &publishedHead{response: response}
		h.published[requestID] = p
		h.waiting++
	}
	return p
}

// Held is how many responses the checker holds, waiting for the entries
// of their steps: what its memory grows with.
func (h *HeadChecker) Held() int { return h.waiting }

func keyIDOf(se *sig.Error) string {
	if se == nil {
		return ""
	}
	return se.KeyID
}

// sigLabel names the signature that failed as algorithm/key_id.
func sigLabel(se *sig.Error) string {
	if se == nil || (se.Algorithm == "" && se.KeyID == "") {
		return ""
	}
	return string(se.Algorithm) + "/" + se.KeyID
}

// sigCause is the cause of a failed signature check without its prefix.
func sigCause(err error) string {
	var se *sig.Error
	if errors.As(err, &se) {
		s := se.Kind.Error()
		if se.Detail != "" {
			s += " (" + se.Detail + ")"
		}
		return s
	}
	return err.Error()
}

// CheckEntry compares the heads published for the entry's step (request_id
// = step_id) with head, the entry_hash the chain check recomputed for it.
// hashEdited says the chain check already reported the entry's stated
// entry_hash as wrong; a published head equal to the stated hash is then
// the same problem and not reported again.
func (h *HeadChecker) CheckEntry(index int, e *acs.Entry, head acs.Hash, hashEdited bool) []Finding {
	h.track(index, e, h.published[e.StepID])
	// The findings about the responses to this step are the entry's.
	var fs []Finding
	if held, ok := h.held[e.StepID]; ok {
		delete(h.held, e.StepID)
		for _, f := range held {
			f.EntryIndex, f.EntryID = index, e.EntryID
			fs = append(fs, f)
		}
	}
	p := h.published[e.StepID]
	if p == nil {
		if contentBearing(e.StepType) && fs == nil {
			return []Finding{{Code: CodeEntryWithoutResponse, EntryIndex: index, EntryID: e.EntryID, StepID: e.StepID,
				Expected: head.String(),
				Message:  fmt.Sprintf("No signed response publishes the head of this %s step, so nothing outside the ledger confirms it.", e.StepType)}}
		}
		return fs
	}
	delete(h.published, e.StepID)
	h.waiting -= 1 + len(p.heads)
	mismatch := false
	for _, pub := range p.heads {
		if pub == head {
			continue
		}
		if hashEdited && e.EntryHash != nil && pub == *e.EntryHash {
			continue // already entry_hash_mismatch
		}
		mismatch = true
		if h.diverged {
			break
		}
		fs = append(fs, Finding{Code: CodeChainMismatch, EntryIndex: index, EntryID: e.EntryID, StepID: e.StepID,
			Expected: pub.String(), Actual: head.String(),
			Message: fmt.Sprintf("The Guardian signed chain_hash %s for this step, but the chain recomputes to %s here: the chain was rewritten from this entry on.", pub, head)})
		break
	}
	// A published previous_chain_hash names the head the entry was
	// chained onto: the entry's previous_hash, which the chain check has
	// already tied to the entry before it.
	if !mismatch && !h.diverged {
		for _, prev := range p.prevs {
			if e.PreviousHash != nil && prev == *e.PreviousHash {
				continue
			}
			actual := ""
			if e.PreviousHash != nil {
				actual = e.PreviousHash.String()
			}
			mismatch = true
			fs = append(fs, Finding{Code: CodeChainMismatch, EntryIndex: index, EntryID: e.EntryID, StepID: e.StepID,
				Expected: prev.String(), Actual: actual,
				Message: fmt.Sprintf("The Guardian signed previous_chain_hash %s for this step, but the entry is chained onto %s: the entries before it were rewritten.", prev, orNone(actual))})
			break
		}
	}
	h.diverged = mismatch
	return fs
}

func orNone(h string) string {
	if h == "" {
		return "nothing (a null previous_hash)"
	}
	return h
}

// contentBearing reports whether a step of this type gets a response that
// must publish its head (ACS §8.6): steps/*, wrapped protocols in either
// form (protocols/MCP/... and the version-pinned wrapped:mcp-<version>/...,
// ACS §3) and agbom/*. Entries written for approver grants
// (intent_extension, ask_resolution) answer no request.
func contentBearing(stepType string) bool {
	return strings.HasPrefix(stepType, "steps/") || strings.HasPrefix(stepType, "protocols/") ||
		strings.HasPrefix(stepType, "wrapped:") || strings.HasPrefix(stepType, "agbom/")
}

// track follows, for RequireSignedHeads, which entries a head signed by an
// author binds: p is what was published for the entry's step, nil for none.
// A bundle without responses tracks its entries with p nil.
func (h *HeadChecker) track(index int, e *acs.Entry, p *publishedHead) {
	if h.authors == nil {
		return
	}
	h.lastIndex = index
	if p != nil && p.authentic {
		// This head binds every entry up to here, whatever signed the
		// heads before it.
		h.unbound = nil
		return
	}
	if h.unbound == nil {
		h.unbound = &unboundRun{index: index, entryID: e.EntryID, stepID: e.StepID}
	}
	if p != nil {
		h.unbound.responses++
		if h.unbound.auth.kind == authNone {
			h.unbound.auth = p.auth
		}
	}
}

// unauthenticated is the head_unauthenticated finding of the entries that
// no head signed by an author binds, or nil.
func (h *HeadChecker) unauthenticated() *Finding {
	u := h.unbound
	if h.authors == nil || u == nil {
		return nil
	}
	span := fmt.Sprintf("entry %d", u.index)
	if h.lastIndex > u.index {
		span = fmt.Sprintf("entries %d to %d", u.index, h.lastIndex)
	}
	keyID := u.auth.label[strings.IndexByte(u.auth.label, '/')+1:]
	var why string
	switch u.auth.kind {
	case authNone:
		why = "no response publishes a head for them"
	case authInvalid:
		why = "the responses that publish their heads carry no valid signature"
	case authHMACNotGiven:
		why = fmt.Sprintf("the heads published for them are signed with HMAC-SHA256 key %q, whose secret was not given", keyID)
	case authHMAC:
		why = fmt.Sprintf("the heads published for them are signed with HMAC-SHA256 key %q: the signatures verify, but whoever holds that secret, the Guardian's operator included, could have signed them", keyID)
	case authUntrusted:
		why = fmt.Sprintf("the heads published for them are signed with %s key %q, which the verifier was not given as trusted (a key the evidence carries shows consistency, not authorship)", u.auth.label[:strings.IndexByte(u.auth.label, '/')], keyID)
	}
	return &Finding{Code: CodeHeadUnauthenticated, EntryIndex: u.index, EntryID: u.entryID, StepID: u.stepID,
		Expected: "a head signed by a trusted asymmetric key", Actual: u.auth.label,
		Message: fmt.Sprintf("No head signed by a trusted asymmetric key binds %s: %s, so nothing shows a third party which Guardian issued them (ACS §8.6).", span, why)}
}

// Finish returns the findings held about responses whose request_id names
// no entry that CheckEntry saw (entry_index -1), and response_without_entry
// for every validly signed one of them. With RequireSignedHeads, it adds
// head_unauthenticated at the first entry no head signed by an author binds.
func (h *HeadChecker) Finish() []Finding {
	var fs []Finding
	if f := h.unauthenticated(); f != nil {
		fs = append(fs, *f)
	}
	for _, id := range h.heldOrder {
		fs = append(fs, h.held[id]...)
		delete(h.held, id)
	}
	h.heldOrder = nil
	ids := make([]string, 0, len(h.published))
	for id, p := range h.published {
		if len(p.heads) > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return h.published[a].response - h.published[b].response })
	for _, id := range ids {
		p := h.published[id]
		fs = append(fs, Finding{Code: CodeResponseWithoutEntry, EntryIndex: -1, StepID: id, Where: fmt.Sprintf("response %d", p.response),
			Expected: p.heads[0].String(),
			Message:  fmt.Sprintf("The Guardian signed chain_hash %s for request %q, but no entry of the chain has that step_id: the entry was removed.", p.heads[0], id)})
	}
	return fs
}

// Responses returns how many responses have been added.
func (h *HeadChecker) Responses() int { return h.responses }

// VerifyChainHeads replays a chain from JSON Lines like VerifyChain and
// checks it against the signed responses, one JSON-RPC response envelope
// per line of responses, as sent. keys verifies their signatures and
// sessionID derives HMAC-SHA256 session keys.
//
// The responses are read first, each checked and reduced to its request_id
// and chain_hash; then the chain streams past. An input error names the
// file ("entries" or "responses") and the 1-based line.
func VerifyChainHeads(entries, responses io.Reader, keys *sig.KeySet, sessionID string) (*Report, error) {
	return NewHeadChecker(keys, sessionID).VerifyChain(entries, responses)
}

// VerifyChain is VerifyChainHeads with the checker h, which is used up:
// call RequireSignedHeads on a new checker first to require heads signed by
// trusted asymmetric keys.
func (h *HeadChecker) VerifyChain(entries, responses io.Reader) (*Report, error) {
	var findings, notices []Finding
	lr := newLineReader(responses)
	blank := 0
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &InputError{File: "responses", Line: lr.n, Err: err}
		}
		if isBlank(line) {
			if blank == 0 {
				blank = lr.n
			}
			continue
		}
		if blank != 0 {
			return nil, &InputError{File: "responses", Line: blank, Err: errors.New("blank line between responses")}
		}
		h.line = lr.n
		fs, ns, err := h.AddResponse(bytes.Clone(line))
		if err != nil {
			return nil, &InputError{File: "responses", Line: lr.n, Err: err}
		}
		findings = append(findings, fs...)
		notices = append(notices, ns...)
	}

	r, err := replay(entries, func(i int, e *acs.Entry, v *ChainVerifier, fs []Finding) []Finding {
		edited := false
		for _, f := range fs {
			edited = edited || f.Code == CodeEntryHashMismatch
		}
		return append(fs, h.CheckEntry(i, e, v.Head(), edited)...)
	})
	if err != nil {
		if ie, ok := err.(*InputError); ok {
			ie.File = "entries"
		}
		return nil, err
	}
	r.Findings = append(findings, r.Findings...)
	r.Findings = append(r.Findings, h.Finish()...)
	r.Notices = notices
	return r, nil
}
