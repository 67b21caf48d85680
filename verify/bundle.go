package verify

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// BundleFormat and BundleVersion identify an evidence bundle
// (docs/evidence-bundle.md, schema docs/evidence-bundle.schema.json).
const (
	BundleFormat  = "acsledger-evidence-bundle"
	BundleVersion = 1
)

// bundleMembers are the members of a bundle in the order they must appear,
// so that it can be checked in one pass with memory for one entry: keys
// before the signatures they check, everything small before the responses,
// the responses before the entries they publish heads of, the entries last.
var bundleMembers = []string{
	"format", "version", "session_id", "keys", "policy_bundles",
	"checkpoints", "timestamps", "consistency_proofs", "anchors", "responses", "entries", "steps",
}

// Trust is what the verifier of a bundle trusts, given from outside the
// bundle. For each kind of key left empty, the keys the bundle itself
// carries are used and a keys_from_bundle notice says so.
type Trust struct {
	// ResponseKeys verify the responses' signatures (HMAC-SHA256 IKMs
	// included, which a bundle never carries).
	ResponseKeys *sig.KeySet
	// Checkpoint names the log keys and the witness policy.
	Checkpoint CheckpointPolicy
	// TSARoots are the certificates (a TSA's own, or its CA) that the
	// RFC 3161 time-stamps of checkpoints must chain to; nil: the bundle's
	// keys.tsa_certs, with a keys_from_bundle notice.
	TSARoots *x509.CertPool
	// RequireTimestamp makes a bundle whose largest checkpoint has no
	// valid time-stamp fail with timestamp_missing.
	RequireTimestamp bool
	// RequireSignedHeads makes a bundle fail with head_unauthenticated
	// unless every entry is bound by a head signed with an asymmetric key
	// of ResponseKeys (HeadChecker.RequireSignedHeads): what a third party
	// needs, since an HMAC head or a key the bundle carries shows nothing
	// about who issued it.
	RequireSignedHeads bool
}

// BundleKeys is the "keys" member of a bundle, and the format of a trust
// file given to acsverify bundle --trust.
type BundleKeys struct {
	ResponseKeys  []json.RawMessage `json:"response_keys,omitempty"` // .pub.json documents
	LogKeys       []string          `json:"log_keys,omitempty"`
	Witnesses     []string          `json:"witnesses,omitempty"`
	WitnessQuorum int               `json:"witness_quorum,omitempty"`
	// TSACerts are PEM certificates of the time-stamping authority (its
	// own or its CA's) that stamps the checkpoints.
	TSACerts []string `json:"tsa_certs,omitempty"`
}

// Timestamp is one element of "timestamps": the RFC 3161 TimeStampResp
// (DER; base64 in JSON) of the checkpoint of size TreeSize.
type Timestamp struct {
	TreeSize uint64 `json:"tree_size"`
	Response []byte `json:"response"`
}

// StampedCheckpoint is a checkpoint whose time-stamp verified, and the
// time the authority vouches the tree existed by.
type StampedCheckpoint struct {
	TreeSize uint64    `json:"tree_size"`
	Time     time.Time `json:"time"`
}

// PolicyBundleRecord is one element of a bundle's "policy_bundles": a
// policy bundle version the ledger recorded, with the time it recorded it.
type PolicyBundleRecord struct {
	PolicyID      string    `json:"policy_id"`
	PolicyVersion string    `json:"policy_version"`
	Digest        string    `json:"digest"` // lowercase hex SHA-256 of the content
	RecordedAt    time.Time `json:"recorded_at"`
	Content       []byte    `json:"content,omitempty"` // optional; base64 in JSON
}

// ConsistencyProof is one element of "consistency_proofs".
type ConsistencyProof struct {
	OldSize uint64   `json:"old_size"`
	NewSize uint64   `json:"new_size"`
	Proof   [][]byte `json:"proof"`
}

// Anchor is one element of "anchors": the inclusion proof of the leaf of
// the entry at Position in the checkpoint of size TreeSize.
type Anchor struct {
	Position  uint64   `json:"position"`
	LeafIndex uint64   `json:"leaf_index"`
	TreeSize  uint64   `json:"tree_size"`
	Proof     [][]byte `json:"proof"`
}

// bundleState is one pass of VerifyBundle.
type bundleState struct {
	trust     Trust
	sessionID string
	bundle    BundleKeys

	policies    map[[2]string]PolicyBundleRecord
	checkpoints []Checkpoint
	bySize      map[uint64]int    // checkpoint index by size
	texts       map[uint64][]byte // checkpoint note text by size, for time-stamps
	stamped     []StampedCheckpoint
	anchors     map[uint64][]int
	anchorList  []Anchor

	heads   *HeadChecker
	noHeads bool // the bundle has no "responses" member
	chain   ChainVerifier

	// anchoredThrough is 1 + the highest position with a valid inclusion
	// proof, or 0.
	anchoredThrough uint64
	// claimedThrough is the same for anchors whose proof failed.
	claimedThrough uint64
	// tail is the first entry after the last anchored one, once seen.
	tail   *Finding
	proven [][2]uint64

	// entryBuf holds the entry of the step being read, payloads its
	// payload members, and entry the entry checkEntry parsed last.
	entryBuf []byte
	payloads stepPayloads
	entry    *acs.Entry

	// inline counts the entries holding their source record inline, the
	// first at index inlineFirst (source_inline).
	inline, inlineFirst int
	// clients counts the entries holding a client member (client_in_entry).
	clients clientNotes

	// since is the report of an earlier bundle of the session that this
	// one must extend (VerifyBundleSince), or nil.
	since *Report

	findings, notices []Finding

	lim                             Limits
	findingsDropped, noticesDropped int
}

// trim keeps the first lim.MaxFindings findings and notices, and counts
// the rest.
func (s *bundleState) trim() {
	n := s.lim.MaxFindings
	if n <= 0 {
		return
	}
	if len(s.findings) > n {
		s.findingsDropped += len(s.findings) - n
		s.findings = s.findings[:n]
	}
	if len(s.notices) > n {
		s.noticesDropped += len(s.notices) - n
		s.notices = s.notices[:n]
	}
}

// VerifyBundle checks an evidence bundle (docs/evidence-bundle.md) in one
// pass: the chain, the published heads, the checkpoints' signatures and
// cosignatures, the consistency of the checkpoints, the anchoring of the
// chain in the log, and the policy references of every decision.
//
// Members must appear in the order of the schema (format, version,
// session_id, keys, policy_bundles, checkpoints, consistency_proofs,
// anchors, responses, and entries or steps). It holds one entry or response
// at a time, and beside it the fork index (bounded by ForkWindow) and, for
// each response read before its entry, its request_id and head: with
// "steps", where each entry comes with its response, memory stays flat
// whatever the session's length.
//
// Each entry and response is parsed strictly once, by acs.ParseEntry and
// the canonicalizer; a step object may hold only "entry" and "response"
// and the payload members "source", "params", "erased" and "missing"
// (checkPayloads), each at most once. A bundle that cannot be read or parsed, whose members
// are out of order, or with a value longer than acs.MaxInput, is an
// *InputError naming the member and the byte offset.
func VerifyBundle(r io.Reader, trust *Trust) (*Report, error) {
	return verifyBundle(r, trust, nil, Limits{})
}

// Limits bound what one verification of a bundle may hold, for a server
// that verifies bundles uploaded by anyone: with them, its memory does not
// grow with the upload. Zero fields do not bound.
type Limits struct {
	// MaxValueBytes bounds one value read whole: an entry, a response, the
	// keys, a checkpoint, a policy record. The default is acs.MaxInput.
	MaxValueBytes int
	// MaxHeldResponses bounds the responses held until the entries of
	// their steps are read: a bundle in the "responses" layout holds all
	// of them, one in the "steps" layout none for long.
	MaxHeldResponses int
	// MaxElements bounds the elements of each of policy_bundles,
	// checkpoints, consistency_proofs and anchors, which are held whole.
	MaxElements int
	// MaxFindings bounds the findings kept, and the notices; the rest are
	// counted in Report.FindingsDropped and NoticesDropped.
	MaxFindings int
}

// VerifyBundleLimited is VerifyBundle within limits: a bundle that needs
// more than they allow is an *InputError naming the limit.
func VerifyBundleLimited(r io.Reader, trust *Trust, lim Limits) (*Report, error) {
	return verifyBundle(r, trust, nil, lim)
}

func verifyBundle(r io.Reader, trust *Trust, since *Report, lim Limits) (*Report, error) {
	s := &bundleState{since: since, lim: lim, policies: map[[2]string]PolicyBundleRecord{}, bySize: map[uint64]int{}, texts: map[uint64][]byte{}, anchors: map[uint64][]int{}}
	if trust != nil {
		s.trust = *trust
	}
	vr := newValueReader(r)
	if lim.MaxValueBytes > 0 {
		vr.max = min(vr.max, lim.MaxValueBytes)
	}
	// each reads the elements of an array member, within the limits.
	each := func(small bool, read func(k int) error) error {
		return vr.elements(func(k int) error {
			if small && lim.MaxElements > 0 && k >= lim.MaxElements {
				return fmt.Errorf("more than %d elements", lim.MaxElements)
			}
			err := read(k)
			s.trim()
			if err == nil && lim.MaxHeldResponses > 0 && s.heads != nil && s.heads.Held() > lim.MaxHeldResponses {
				err = fmt.Errorf("more than %d responses wait for their entries: put each response beside its entry (\"steps\")", lim.MaxHeldResponses)
			}
			return err
		})
	}
	fail := func(member string, err error) (*Report, error) {
		return nil, &InputError{File: "bundle", Offset: vr.offset(), Member: member, Err: err}
	}
	if c, err := vr.peek(); err != nil || c != '{' {
		if err == nil {
			err = errors.New("a bundle is a JSON object")
		}
		return fail("", err)
	}
	rank := -1
	seen := map[string]bool{}
	var format string
	var version json.Number
	read := func(name string) error {
		i := slices.Index(bundleMembers, name)
		switch {
		case i < 0:
			return fmt.Errorf("unknown member %q", name)
		case i <= rank:
			return fmt.Errorf("member %q after %q: members must appear in the order %v", name, bundleMembers[rank], bundleMembers)
		}
		rank = i
		seen[name] = true
		if i > 1 && (format != BundleFormat || version.String() != strconv.Itoa(BundleVersion)) {
			return fmt.Errorf("bundle does not start with \"format\": %q, \"version\": %d", BundleFormat, BundleVersion)
		}
		switch name {
		case "format":
			return decodeValue(vr, &format)
		case "version":
			return decodeValue(vr, &version)
		case "session_id":
			if err := decodeValue(vr, &s.sessionID); err != nil {
				return err
			}
			if s.sessionID == "" {
				return errors.New("empty session_id")
			}
			if since != nil && since.SessionID != s.sessionID {
				return fmt.Errorf("session %q, but the earlier bundle is of session %q", s.sessionID, since.SessionID)
			}
		case "keys":
			return s.readKeys(vr)
		case "policy_bundles":
			return each(true, func(k int) error { return s.readPolicy(vr, k) })
		case "checkpoints":
			return each(true, func(k int) error { return s.readCheckpoint(vr, k) })
		case "timestamps":
			return each(true, func(k int) error { return s.readTimestamp(vr, k) })
		case "consistency_proofs":
			return each(true, func(k int) error { return s.readConsistency(vr, k) })
		case "anchors":
			return each(true, func(k int) error { return s.readAnchor(vr, k) })
		case "responses":
			s.startHeads()
			return each(false, func(k int) error { return s.readResponse(vr) })
		case "entries", "steps":
			if seen["entries"] && seen["steps"] {
				return errors.New(`a bundle has "entries" or "steps", not both`)
			}
			if seen["responses"] && name == "steps" {
				return errors.New(`a bundle with "steps" carries its responses in them, not in "responses"`)
			}
			if !seen["responses"] && name == "entries" {
				s.noHeads = true
				s.notices = append(s.notices, Finding{Code: CodeHeadsNotChecked, EntryIndex: -1, Where: "responses",
					Message: "The bundle has no responses, so no published chain head was checked: a chain rewritten and re-hashed forward before it was logged would pass."})
			}
			s.startHeads()
			if name == "steps" {
				return each(false, func(k int) error { return s.readStep(vr, k) })
			}
			return each(false, func(k int) error { return s.readEntry(vr, k) })
		}
		return nil
	}
	var member string // the member being read, for errors
	err := vr.members(func(name string) error {
		member = name
		if err := read(name); err != nil {
			return err
		}
		member = ""
		return nil
	})
	if err != nil {
		return fail(member, err)
	}
	if end, err := vr.atEnd(); err != nil || !end {
		if err == nil {
			err = errors.New("data after the bundle object")
		}
		return fail("", err)
	}
	for _, m := range []string{"format", "version", "session_id"} {
		if !seen[m] {
			return fail("", fmt.Errorf("no %q member", m))
		}
	}
	if !seen["entries"] && !seen["steps"] {
		return fail("", errors.New(`no "entries" or "steps" member`))
	}
	if s.chain.Entries() == 0 {
		return fail("entries", errors.New("no context entries"))
	}
	s.finish()
	s.trim()
	rep := &Report{Entries: s.chain.Entries(), Head: s.chain.Head(), Findings: s.findings, Notices: s.notices, SessionID: s.sessionID,
		FindingsDropped: s.findingsDropped, NoticesDropped: s.noticesDropped, Timestamps: s.stamped}
	for _, cp := range s.checkpoints {
		if rep.Checkpoint == nil || cp.Size > rep.Checkpoint.Size {
			rep.Checkpoint = &cp
		}
	}
	return rep, nil
}

// decodeValue decodes the next value into v with encoding/json.
func decodeValue(vr *valueReader, v any) error {
	raw, err := vr.value()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// decodeStrict decodes the next value into v, refusing unknown members.
func decodeStrict(vr *valueReader, v any) error {
	raw, err := vr.value()
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the value")
	}
	return nil
}

// readKeys reads the keys the bundle carries; each must parse.
func (s *bundleState) readKeys(vr *valueReader) error {
	if err := decodeStrict(vr, &s.bundle); err != nil {
		return err
	}
	var carried Trust
	return carried.Merge(&s.bundle)
}

// startHeads fixes the keys the responses are checked with, once.
func (s *bundleState) startHeads() {
	if s.heads != nil {
		return
	}
	keys := new(sig.KeySet)
	asymmetric := false
	if s.trust.ResponseKeys != nil {
		for _, id := range s.trust.ResponseKeys.KeyIDs() {
			k, _ := s.trust.ResponseKeys.Get(id)
			_ = keys.Add(k)
			asymmetric = asymmetric || !k.Algorithm().Symmetric()
		}
	}
	if !asymmetric && len(s.bundle.ResponseKeys) > 0 {
		for _, raw := range s.bundle.ResponseKeys {
			// readKeys parsed each one; a key_id the trusted keys
			// already name keeps the trusted key.
			if k, err := sig.ParsePublicKey(raw); err == nil {
				_ = keys.Add(k)
			}
		}
		s.notices = append(s.notices, Finding{Code: CodeKeysFromBundle, EntryIndex: -1, Where: "keys.response_keys",
			Message: "No trusted response key was given, so the response signatures were checked with the keys the bundle carries: this shows consistency, not authorship."})
	}
	s.heads = NewHeadChecker(keys, s.sessionID)
	if s.trust.RequireSignedHeads {
		s.heads.RequireSignedHeads(s.trust.ResponseKeys)
	}
}

func (s *bundleState) checkpointPolicy() *CheckpointPolicy {
	p := s.trust.Checkpoint
	if len(p.LogKeys) == 0 && len(s.bundle.LogKeys) > 0 {
		p.LogKeys = s.bundle.LogKeys
		s.notices = append(s.notices, Finding{Code: CodeKeysFromBundle, EntryIndex: -1, Where: "keys.log_keys",
			Message: "No trusted log key was given, so the checkpoints were checked with the log keys the bundle carries: this shows consistency, not authorship."})
	}
	if len(p.Witnesses) == 0 && len(s.bundle.Witnesses) > 0 {
		p.Witnesses, p.WitnessQuorum = s.bundle.Witnesses, s.bundle.WitnessQuorum
		s.notices = append(s.notices, Finding{Code: CodeKeysFromBundle, EntryIndex: -1, Where: "keys.witnesses",
			Message: "No trusted witness was given, so the cosignatures were checked against the witness policy the bundle carries."})
	}
	s.trust.Checkpoint = p
	return &s.trust.Checkpoint
}

func (s *bundleState) readPolicy(vr *valueReader, i int) error {
	var p PolicyBundleRecord
	if err := decodeStrict(vr, &p); err != nil {
		return err
	}
	if p.PolicyID == "" || p.PolicyVersion == "" {
		return errors.New("policy_id and policy_version must be non-empty")
	}
	want, err := acs.ParseHash(p.Digest)
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if p.Content != nil {
		if got := sha256.Sum256(p.Content); got != want {
			s.findings = append(s.findings, Finding{Code: CodePolicyDigestMismatch, EntryIndex: -1, Where: fmt.Sprintf("policy_bundles[%d]", i),
				Expected: p.Digest, Actual: hex.EncodeToString(got[:]),
				Message: fmt.Sprintf("The content of policy %s version %s does not hash to its recorded digest.", p.PolicyID, p.PolicyVersion)})
		}
		p.Content = nil // only the digest is needed from here on
	}
	key := [2]string{p.PolicyID, p.PolicyVersion}
	if _, dup := s.policies[key]; dup {
		return fmt.Errorf("policy %s version %s recorded twice", p.PolicyID, p.PolicyVersion)
	}
	s.policies[key] = p
	return nil
}

func (s *bundleState) readCheckpoint(vr *valueReader, i int) error {
	var note string
	if err := decodeValue(vr, &note); err != nil {
		return err
	}
	where := fmt.Sprintf("checkpoints[%d]", i)
	cp, fs, err := VerifyCheckpoint([]byte(note), s.checkpointPolicy(), where)
	if err != nil {
		return err
	}
	s.findings = append(s.findings, fs...)
	if j, ok := s.bySize[cp.Size]; ok {
		if s.checkpoints[j].Root != cp.Root {
			s.findings = append(s.findings, Finding{Code: CodeConsistencyProofInvalid, EntryIndex: -1, Where: where,
				Expected: hex.EncodeToString(s.checkpoints[j].Root[:]), Actual: hex.EncodeToString(cp.Root[:]),
				Message: fmt.Sprintf("Checkpoints %d and %d both have size %d but different roots: the log was forked.", j, i, cp.Size)})
		}
	} else {
		s.bySize[cp.Size] = i
		if text, err := CheckpointText([]byte(note)); err == nil {
			s.texts[cp.Size] = text
		}
	}
	s.checkpoints = append(s.checkpoints, cp)
	return nil
}

func (s *bundleState) readConsistency(vr *valueReader, i int) error {
	var p ConsistencyProof
	if err := decodeStrict(vr, &p); err != nil {
		return err
	}
	where := fmt.Sprintf("consistency_proofs[%d]", i)
	a, okA := s.bySize[p.OldSize]
	b, okB := s.bySize[p.NewSize]
	if !okA || !okB {
		return fmt.Errorf("sizes %d and %d are not both sizes of checkpoints in the bundle", p.OldSize, p.NewSize)
	}
	if p.OldSize == 0 {
		return nil // the empty tree is a prefix of every tree
	}
	old, cur := s.checkpoints[a], s.checkpoints[b]
	if err := VerifyConsistency(p.OldSize, p.NewSize, p.Proof, old.Root, cur.Root); err != nil {
		s.findings = append(s.findings, Finding{Code: CodeConsistencyProofInvalid, EntryIndex: -1, Where: where,
			Expected: hex.EncodeToString(cur.Root[:]), Actual: "",
			Message: fmt.Sprintf("The proof does not show the log of size %d is a prefix of the log of size %d (%v): the log was rewritten or forked.", p.OldSize, p.NewSize, err)})
	}
	s.proven = append(s.proven, [2]uint64{p.OldSize, p.NewSize})
	return nil
}

func (s *bundleState) readAnchor(vr *valueReader, i int) error {
	var a Anchor
	if err := decodeStrict(vr, &a); err != nil {
		return err
	}
	if _, ok := s.bySize[a.TreeSize]; !ok {
		return fmt.Errorf("tree_size %d is not the size of a checkpoint in the bundle", a.TreeSize)
	}
	s.anchors[a.Position] = append(s.anchors[a.Position], len(s.anchorList))
	s.anchorList = append(s.anchorList, a)
	return nil
}

func (s *bundleState) readResponse(vr *valueReader) error {
	raw, err := vr.value()
	if err != nil {
		return err
	}
	return s.addResponse(raw)
}

func (s *bundleState) addResponse(raw []byte) error {
	fs, ns, err := s.heads.AddResponse(raw)
	if err != nil {
		return err
	}
	s.findings = append(s.findings, fs...)
	s.notices = append(s.notices, ns...)
	return nil
}

// readStep reads one element of "steps": an entry with the response that
// published its head, if any, so that neither is held past its step. The
// response is checked as soon as it is read, the entry (copied into a
// buffer kept from step to step) once the step is read whole: a response
// is added before the entry of its step is checked.
func (s *bundleState) readStep(vr *valueReader, i int) error {
	hasEntry, hasResponse := false, false
	s.payloads.reset()
	var seen [4]string
	nSeen := 0
	err := vr.members(func(name string) error {
		switch {
		case name == "entry" && !hasEntry:
			hasEntry = true
			raw, err := vr.value()
			s.entryBuf = append(s.entryBuf[:0], raw...)
			return err
		case name == "response" && !hasResponse:
			hasResponse = true
			raw, err := vr.value()
			if err != nil || string(raw) == "null" {
				return err
			}
			if err := s.addResponse(raw); err != nil {
				return fmt.Errorf("response: %w", err)
			}
			return nil
		case name == "entry" || name == "response":
			return fmt.Errorf("duplicate member %q", name)
		}
		for _, n := range seen[:nSeen] {
			if n == name {
				return fmt.Errorf("duplicate member %q", name)
			}
		}
		ok, err := s.payloads.readPayloadMember(vr, name)
		if !ok {
			return fmt.Errorf("unknown field %q", name)
		}
		seen[nSeen] = name
		nSeen++
		return err
	})
	if err != nil {
		return err
	}
	if !hasEntry {
		return errors.New(`step has no "entry"`)
	}
	if err := s.checkEntry(s.entryBuf, i); err != nil {
		return fmt.Errorf("entry: %w", err)
	}
	s.checkPayloads(i, s.entry, &s.payloads)
	return nil
}

func (s *bundleState) readEntry(vr *valueReader, i int) error {
	raw, err := vr.value()
	if err != nil {
		return err
	}
	return s.checkEntry(raw, i)
}

// checkEntry runs every check of one entry.
func (s *bundleState) checkEntry(raw []byte, i int) error {
	e, err := acs.ParseEntry(raw)
	if err != nil {
		return err
	}
	s.entry = e
	s.noteInline(i, e)
	s.clients.note(i, e)
	fs := s.chain.Add(e)
	edited := false
	for _, f := range fs {
		edited = edited || f.Code == CodeEntryHashMismatch
	}
	head := s.chain.Head()
	if !s.noHeads {
		fs = append(fs, s.heads.CheckEntry(i, e, head, edited)...)
	} else {
		s.heads.track(i, e, nil) // no head binds it
	}
	fs = append(fs, s.checkAnchors(i, e, head)...)
	if max(s.anchoredThrough, s.claimedThrough) > uint64(i) {
		s.tail = nil
	} else if s.tail == nil {
		s.tail = &Finding{Code: CodeNotAnchored, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID}
	}
	fs = append(fs, s.checkPolicies(i, e)...)
	fs = append(fs, s.checkSinceEntry(i, e, head)...)
	s.findings = append(s.findings, fs...)
	return nil
}

// checkAnchors checks the inclusion proofs of the entry at position i.
func (s *bundleState) checkAnchors(i int, e *acs.Entry, head acs.Hash) []Finding {
	var fs []Finding
	for _, k := range s.anchors[uint64(i)] {
		a := s.anchorList[k]
		leaf, err := LeafHash(s.sessionID, a.Position, head)
		if err == nil {
			cp := s.checkpoints[s.bySize[a.TreeSize]]
			err = VerifyInclusion(leaf, a.LeafIndex, a.TreeSize, a.Proof, cp.Root)
		}
		if err != nil {
			// Reported here; the entries it was to anchor are not also
			// reported as not_anchored.
			s.claimedThrough = max(s.claimedThrough, uint64(i)+1)
			fs = append(fs, Finding{Code: CodeInclusionProofInvalid, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID,
				Expected: head.String(), Where: fmt.Sprintf("anchors[%d]", k),
				Message: fmt.Sprintf("The inclusion proof of anchor %d does not lead from this entry's leaf (leaf index %d) to the root of the checkpoint of size %d: %v.", k, a.LeafIndex, a.TreeSize, err)})
			continue
		}
		s.anchoredThrough = max(s.anchoredThrough, uint64(i)+1)
	}
	return fs
}

// policyRef is one element of a decision's policy_references.
type policyRef struct {
	PolicyID, PolicyVersion, RuleID string
}

// checkPolicies resolves the entry's policy references: those of its
// decision object (the Guardian's shape), and of a top-level
// policy_references member. It reads them from the entry's canonical
// content.
func (s *bundleState) checkPolicies(i int, e *acs.Entry) []Finding {
	refs := entryPolicyRefs(e.Content)
	if len(refs) == 0 {
		return nil
	}
	decided, terr := time.Parse(time.RFC3339Nano, e.Timestamp)
	var fs []Finding
	for _, ref := range refs {
		name := ref.PolicyID + "@" + ref.PolicyVersion
		p, ok := s.policies[[2]string{ref.PolicyID, ref.PolicyVersion}]
		switch {
		case !ok:
			fs = append(fs, Finding{Code: CodePolicyUnresolved, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID,
				Expected: "", Actual: name,
				Message: fmt.Sprintf("The decision cites policy %s version %q (rule %q), which the evidence does not record.", ref.PolicyID, ref.PolicyVersion, ref.RuleID)})
		case terr == nil && p.RecordedAt.After(decided):
			fs = append(fs, Finding{Code: CodePolicyRecordedAfterDecision, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID,
				Expected: "recorded at or before " + e.Timestamp, Actual: p.RecordedAt.Format(time.RFC3339Nano),
				Message: fmt.Sprintf("The decision at %s cites policy %s, which was recorded only at %s.", e.Timestamp, name, p.RecordedAt.Format(time.RFC3339Nano))})
		}
	}
	return fs
}

// entryPolicyRefs returns the policy references of an entry's canonical
// content: those of a top-level policy_references member, then those of
// its decision object (the Guardian's shape).
func entryPolicyRefs(content []byte) []policyRef {
	if !bytes.Contains(content, []byte(`"policy_references"`)) {
		return nil
	}
	var top, decision []byte
	acs.CanonicalMembers(content, func(key, v []byte) bool {
		switch string(key) {
		case "decision":
			decision = v
		case "policy_references":
			top = v
		}
		return true
	})
	refs, ok := policyRefs(top)
	if !ok {
		return nil
	}
	if len(decision) > 0 && decision[0] == '{' {
		if more, ok := policyRefs(acs.CanonicalMember(decision, "policy_references")); ok {
			refs = append(refs, more...)
		}
	}
	return refs
}

// policyRefs reads a canonical policy_references value: an array of
// objects whose policy_id, policy_version and rule_id are strings. Absent
// or null, it holds no reference; a null element or member reads as empty.
// ok is false when the value is not of that shape: its references are then
// not read, as they were not written the way the Guardian writes them.
func policyRefs(v []byte) (refs []policyRef, ok bool) {
	if v == nil || string(v) == "null" {
		return nil, true
	}
	shaped := true
	isArray := acs.CanonicalElements(v, func(elem []byte) {
		var ref policyRef
		if string(elem) != "null" {
			if elem[0] != '{' {
				shaped = false
				return
			}
			for _, m := range []struct {
				name string
				to   *string
			}{{"policy_id", &ref.PolicyID}, {"policy_version", &ref.PolicyVersion}, {"rule_id", &ref.RuleID}} {
				mv := acs.CanonicalMember(elem, m.name)
				if mv == nil || string(mv) == "null" {
					continue
				}
				str, isString := canonicalString(mv)
				if !isString {
					shaped = false
					return
				}
				*m.to = str
			}
		}
		refs = append(refs, ref)
	})
	return refs, isArray && shaped
}

// tsaRoots returns the TSA certificates to check time-stamps against:
// the auditor's, else the bundle's (with a notice), else nil.
func (s *bundleState) tsaRoots() (*x509.CertPool, error) {
	if s.trust.TSARoots != nil || len(s.bundle.TSACerts) == 0 {
		return s.trust.TSARoots, nil
	}
	pool, err := ParseTSACerts([]byte(strings.Join(s.bundle.TSACerts, "\n")))
	if err != nil {
		return nil, fmt.Errorf("keys.tsa_certs: %w", err)
	}
	s.trust.TSARoots = pool
	s.notices = append(s.notices, Finding{Code: CodeKeysFromBundle, EntryIndex: -1, Where: "keys.tsa_certs",
		Message: "No trusted TSA certificate was given, so the time-stamps were checked against the TSA certificates the bundle carries: this shows consistency, not which authority stamped them."})
	return pool, nil
}

// readTimestamp checks one element of "timestamps" against the
// checkpoint of its size, which must be in the bundle.
func (s *bundleState) readTimestamp(vr *valueReader, i int) error {
	var ts Timestamp
	if err := decodeStrict(vr, &ts); err != nil {
		return err
	}
	text, ok := s.texts[ts.TreeSize]
	if !ok {
		return fmt.Errorf("tree_size %d is not the size of a checkpoint in the bundle", ts.TreeSize)
	}
	roots, err := s.tsaRoots()
	if err != nil {
		return err
	}
	where := fmt.Sprintf("timestamps[%d]", i)
	if roots == nil {
		s.findings = append(s.findings, Finding{Code: CodeTimestampInvalid, EntryIndex: -1, Where: where,
			Expected: "a TSA certificate", Actual: "",
			Message: fmt.Sprintf("The time-stamp of checkpoint %d cannot be checked: no TSA certificate was given (acsverify --tsa-cert) or carried.", ts.TreeSize)})
		return nil
	}
	// The text alone, closed as a note, is what CheckTimestamp reads.
	when, err := CheckTimestamp(ts.Response, append(bytes.Clone(text), '\n'), roots)
	if err != nil {
		s.findings = append(s.findings, Finding{Code: CodeTimestampInvalid, EntryIndex: -1, Where: where,
			Expected: fmt.Sprintf("a time-stamp of checkpoint %d by a trusted TSA", ts.TreeSize), Actual: "",
			Message: fmt.Sprintf("The time-stamp of checkpoint %d does not verify: %v.", ts.TreeSize, err)})
		return nil
	}
	s.stamped = append(s.stamped, StampedCheckpoint{TreeSize: ts.TreeSize, Time: when})
	return nil
}

// finishTimestamps reports, when a time-stamp is required, a largest
// checkpoint without a valid one. The largest is the one the anchors
// lead to; its time covers every smaller tree the bundle proves it
// extends.
func (s *bundleState) finishTimestamps() {
	if !s.trust.RequireTimestamp {
		return
	}
	var largest uint64
	for n := range s.bySize {
		largest = max(largest, n)
	}
	if len(s.bySize) == 0 {
		s.findings = append(s.findings, Finding{Code: CodeTimestampMissing, EntryIndex: -1, Where: "checkpoints",
			Expected: "a time-stamped checkpoint", Message: "A time-stamp is required, and the bundle has no checkpoint to carry one."})
		return
	}
	for _, st := range s.stamped {
		if st.TreeSize == largest {
			return
		}
	}
	s.findings = append(s.findings, Finding{Code: CodeTimestampMissing, EntryIndex: -1, Where: fmt.Sprintf("checkpoints[%d]", s.bySize[largest]),
		Expected: fmt.Sprintf("a valid time-stamp of checkpoint %d", largest),
		Message:  fmt.Sprintf("A time-stamp is required, and checkpoint %d has no valid one.", largest)})
}

// finish adds what only the end of the bundle shows.
func (s *bundleState) finish() {
	s.finishInline()
	s.notices = append(s.notices, s.clients.finish()...)
	s.findings = append(s.findings, s.finishSince()...)
	s.finishTimestamps()
	if s.heads != nil {
		s.findings = append(s.findings, s.heads.Finish()...)
	}
	// Each pair of successive checkpoint sizes needs a consistency proof.
	sizes := make([]uint64, 0, len(s.bySize))
	for n := range s.bySize {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	for k := 1; k < len(sizes); k++ {
		if sizes[k-1] == 0 || slices.Contains(s.proven, [2]uint64{sizes[k-1], sizes[k]}) {
			continue
		}
		s.findings = append(s.findings, Finding{Code: CodeConsistencyProofInvalid, EntryIndex: -1,
			Where:    fmt.Sprintf("checkpoints[%d]", s.bySize[sizes[k]]),
			Expected: fmt.Sprintf("a consistency proof from size %d to %d", sizes[k-1], sizes[k]),
			Message:  fmt.Sprintf("No consistency proof shows the log of size %d is a prefix of the log of size %d.", sizes[k-1], sizes[k])})
	}
	cut := false
	for k, a := range s.anchorList {
		if a.Position >= uint64(s.chain.Entries()) {
			cut = true
			s.findings = append(s.findings, Finding{Code: CodeAnchorWithoutEntry, EntryIndex: -1, Where: fmt.Sprintf("anchors[%d]", k),
				Expected: fmt.Sprintf("an entry at position %d", a.Position), Actual: "",
				Message: fmt.Sprintf("Anchor %d says the log holds an entry of this session at position %d, but the chain has only %d entries: its tail was cut off.", k, a.Position, s.chain.Entries())})
		}
	}
	if f := s.tail; f != nil && !cut {
		// Anchoring an entry anchors every entry before it through the
		// chain links; the unanchored tail starts after the last anchor.
		n := s.chain.Entries()
		f.Expected = "an inclusion proof for this entry or a later one"
		f.Message = fmt.Sprintf("No valid inclusion proof ties entry %d or any later entry to a checkpoint, so entries %d to %d could be rewritten without the log showing it.", f.EntryIndex, f.EntryIndex, n-1)
		s.findings = append(s.findings, *f)
	}
}

// ParseTrust reads a trust file: a JSON object of the shape of a bundle's
// "keys" member (response_keys as .pub.json documents, log_keys, witnesses,
// witness_quorum). Every key must parse.
func ParseTrust(b []byte) (*Trust, error) {
	var k BundleKeys
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&k); err != nil {
		return nil, err
	}
	t := &Trust{ResponseKeys: new(sig.KeySet)}
	if err := t.Merge(&k); err != nil {
		return nil, err
	}
	return t, nil
}

// Merge adds the keys of k to t; the witness quorum becomes the larger.
func (t *Trust) Merge(k *BundleKeys) error {
	if t.ResponseKeys == nil {
		t.ResponseKeys = new(sig.KeySet)
	}
	for i, raw := range k.ResponseKeys {
		pk, err := sig.ParsePublicKey(raw)
		if err != nil {
			return fmt.Errorf("response_keys[%d]: %w", i, err)
		}
		if err := t.ResponseKeys.Add(pk); err != nil {
			return fmt.Errorf("response_keys[%d]: %w", i, err)
		}
	}
	for i, v := range k.LogKeys {
		if _, err := NoteVerifier(v); err != nil {
			return fmt.Errorf("log_keys[%d]: %w", i, err)
		}
	}
	for i, v := range k.Witnesses {
		if _, err := NoteVerifier(v); err != nil {
			return fmt.Errorf("witnesses[%d]: %w", i, err)
		}
	}
	if k.WitnessQuorum < 0 || k.WitnessQuorum > len(k.Witnesses)+len(t.Checkpoint.Witnesses) {
		return fmt.Errorf("witness_quorum %d: want 0 to the number of witnesses", k.WitnessQuorum)
	}
	t.Checkpoint.LogKeys = append(t.Checkpoint.LogKeys, k.LogKeys...)
	t.Checkpoint.Witnesses = append(t.Checkpoint.Witnesses, k.Witnesses...)
	t.Checkpoint.WitnessQuorum = max(t.Checkpoint.WitnessQuorum, k.WitnessQuorum)
	if len(k.TSACerts) > 0 {
		pool, err := ParseTSACerts([]byte(strings.Join(k.TSACerts, "\n")))
		if err != nil {
			return fmt.Errorf("tsa_certs: %w", err)
		}
		if t.TSARoots == nil {
			t.TSARoots = pool
		} else {
			for _, c := range k.TSACerts {
				t.TSARoots.AppendCertsFromPEM([]byte(c))
			}
		}
	}
	return nil
}
