package verify

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// ReceiptFormat and ReceiptVersion identify the extra data of a receipt
// (docs/receipts.md): the JSON object a c2sp.org/tlog-proof carries on its
// "extra" line when acsledger issues it for one entry.
const (
	ReceiptFormat  = "acsledger-receipt"
	ReceiptVersion = 1
)

// proofHeader is the first line of every c2sp.org/tlog-proof@v1 document.
const proofHeader = "c2sp.org/tlog-proof@v1"

// MaxReceiptSize bounds a receipt a verifier reads: the entry and its
// response dominate, and both are bounded far below it by the Guardian.
const MaxReceiptSize = 16 << 20

// maxProofHashes bounds the inclusion proof: a tree of 2^63 leaves has 63.
const maxProofHashes = 63

// A Receipt is a parsed c2sp.org/tlog-proof@v1 document: the inclusion
// proof of the leaf at Index in the tree of Checkpoint, and the opaque
// extra data, which for an acsledger receipt is a [ReceiptExtra].
type Receipt struct {
	Extra      []byte // nil when the document has no extra line
	Index      uint64
	Proof      [][]byte
	Checkpoint []byte // the signed note, verbatim, cosignatures included
}

// ReceiptExtra is the extra data of an acsledger receipt, in RFC 8785
// form. Entry is the whole ContextEntry (entry_hash and previous_hash
// included); Response is the Guardian's signed response to its step, when
// it has one; PolicyReferences are the policy versions the entry's
// decision cites, in the order it cites them.
//
// TimestampToken is the RFC 3161 TimeStampToken (DER CMS, base64 in JSON)
// over the receipt's checkpoint note, as the log's time-stamping authority
// issued it (its message imprint is SHA-256 of the note text,
// [CheckpointText]); absent when the log has no authority or the
// checkpoint was not stamped yet when the receipt was made.
type ReceiptExtra struct {
	Format           string             `json:"format"`
	Version          int                `json:"version"`
	SessionID        string             `json:"session_id"`
	Position         uint64             `json:"position"`
	Entry            json.RawMessage    `json:"entry"`
	Response         json.RawMessage    `json:"response,omitempty"`
	PolicyReferences []ReceiptPolicyRef `json:"policy_references"`
	TimestampToken   []byte             `json:"timestamp_token,omitempty"`
}

// ReceiptPolicyRef is one policy version a decision cites: the
// policy_id, policy_version and rule_id of one of its policy_references
// ("" for a member it lacks).
type ReceiptPolicyRef struct {
	PolicyID      string `json:"policy_id"`
	PolicyVersion string `json:"policy_version"`
	RuleID        string `json:"rule_id"`
}

// EntryPolicyRefs returns the policy references an entry's decision
// cites, read from its canonical content the way bundle verification
// reads them: a top-level policy_references member, then the decision
// object's. An entry citing none gives an empty, non-nil slice.
func EntryPolicyRefs(content []byte) []ReceiptPolicyRef {
	out := []ReceiptPolicyRef{}
	for _, r := range entryPolicyRefs(content) {
		out = append(out, ReceiptPolicyRef(r))
	}
	return out
}

// FormatReceipt writes a c2sp.org/tlog-proof@v1 document: the header, the
// extra line when extra is not nil, the index, the proof hashes one per
// line, an empty line and the checkpoint verbatim.
func FormatReceipt(extra []byte, index uint64, proof [][]byte, checkpoint []byte) []byte {
	b := make([]byte, 0, len(proofHeader)+base64.StdEncoding.EncodedLen(len(extra))+len(proof)*45+len(checkpoint)+40)
	b = append(b, proofHeader+"\n"...)
	if extra != nil {
		b = append(b, "extra "...)
		b = base64.StdEncoding.AppendEncode(b, extra)
		b = append(b, '\n')
	}
	b = fmt.Appendf(b, "index %d\n", index)
	for _, h := range proof {
		b = base64.StdEncoding.AppendEncode(b, h)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, checkpoint...)
}

// ParseReceipt parses a c2sp.org/tlog-proof@v1 document strictly: lines
// end in "\n"; base64 is the standard encoding in its one canonical
// spelling; the index is decimal without leading zeros; every proof line
// is one SHA-256 hash. Errors are *InputError naming the 1-based line. The
// checkpoint is returned as it stands; VerifyReceipt checks it.
func ParseReceipt(doc []byte) (*Receipt, error) {
	if len(doc) > MaxReceiptSize {
		return nil, &InputError{Line: 1, Err: fmt.Errorf("the receipt is larger than %d bytes", MaxReceiptSize)}
	}
	head, cp, ok := bytes.Cut(doc, []byte("\n\n"))
	if !ok {
		return nil, &InputError{Line: 1, Err: errors.New("no empty line before the checkpoint: not a c2sp.org/tlog-proof document")}
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != proofHeader {
		return nil, &InputError{Line: 1, Err: fmt.Errorf("the first line is %q, want %q", truncate(lines[0]), proofHeader)}
	}
	r := &Receipt{Checkpoint: cp}
	n := 1
	if len(lines) > n && strings.HasPrefix(lines[n], "extra ") {
		enc := strings.TrimPrefix(lines[n], "extra ")
		extra, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil || enc == "" {
			return nil, &InputError{Line: n + 1, Err: errors.New("the extra line is not standard base64")}
		}
		r.Extra = extra
		n++
	}
	if len(lines) <= n || !strings.HasPrefix(lines[n], "index ") {
		return nil, &InputError{Line: n + 1, Err: errors.New(`missing the "index N" line`)}
	}
	idx := strings.TrimPrefix(lines[n], "index ")
	v, err := strconv.ParseUint(idx, 10, 64)
	if err != nil || (len(idx) > 1 && idx[0] == '0') || idx[0] == '+' {
		return nil, &InputError{Line: n + 1, Err: fmt.Errorf("index %q is not a decimal number without leading zeros", truncate(idx))}
	}
	r.Index = v
	n++
	if len(lines)-n > maxProofHashes {
		return nil, &InputError{Line: n + maxProofHashes + 1, Err: fmt.Errorf("more than %d inclusion proof hashes", maxProofHashes)}
	}
	for ; n < len(lines); n++ {
		h, err := base64.StdEncoding.Strict().DecodeString(lines[n])
		if err != nil || len(h) != 32 {
			return nil, &InputError{Line: n + 1, Err: errors.New("an inclusion proof line is not one base64 SHA-256 hash")}
		}
		r.Proof = append(r.Proof, h)
	}
	return r, nil
}

// ReceiptTrust is what the verifier of a receipt trusts, given from
// outside it: a receipt carries no keys.
type ReceiptTrust struct {
	// ResponseKeys verify the signed response. Nil: its signature is not
	// checked (a response_not_checked notice says so).
	ResponseKeys *sig.KeySet
	// Checkpoint names the log keys and the witness policy.
	Checkpoint CheckpointPolicy
	// TSARoots are the certificates (a TSA's own, or its CA) the
	// receipt's time-stamp must chain to. Nil: a time-stamp is not
	// checked (the notice timestamp_not_checked says so), or is
	// timestamp_invalid when RequireTimestamp is set.
	TSARoots *x509.CertPool
	// RequireTimestamp makes a receipt without a valid time-stamp of its
	// checkpoint a finding (timestamp_missing).
	RequireTimestamp bool
}

// NewerCheckpoint is a checkpoint an auditor holds that is newer than a
// receipt's, with the consistency proof from the receipt's tree to it.
type NewerCheckpoint struct {
	Signed      []byte
	Consistency [][]byte
}

// ReceiptReport is what VerifyReceipt found: what the receipt proves, and
// the findings that say where it does not. Its JSON shape is the one
// `acsverify receipt --json` prints.
type ReceiptReport struct {
	Verified         bool               `json:"verified"`
	SessionID        string             `json:"session_id"`
	Position         uint64             `json:"position"`
	LeafIndex        uint64             `json:"leaf_index"`
	TreeSize         uint64             `json:"tree_size"`
	Origin           string             `json:"origin"`
	EntryHash        string             `json:"entry_hash"`
	EntryID          string             `json:"entry_id"`
	StepID           string             `json:"step_id"`
	StepType         string             `json:"step_type"`
	Timestamp        string             `json:"timestamp"`
	Decision         string             `json:"decision,omitempty"`
	PolicyReferences []ReceiptPolicyRef `json:"policy_references"`
	Response         bool               `json:"response"`
	TimestampToken   bool               `json:"timestamp_token"`
	// Timestamps holds the receipt's checkpoint with the time its RFC
	// 3161 time-stamp vouches for, when that verified (at most one).
	Timestamps    []StampedCheckpoint `json:"timestamps,omitempty"`
	NewerTreeSize uint64              `json:"newer_tree_size,omitempty"`
	Findings      []Finding           `json:"findings"`
	Notices       []Finding           `json:"notices,omitempty"`
}

// VerifyReceipt checks an acsledger receipt offline: that its checkpoint
// is signed by the trusted log keys and cosigned by a quorum of the
// trusted witnesses (cosignatures by any other key are ignored, as
// c2sp.org/tlog-proof says); that the entry hashes to its entry_hash
// (ACS §8.2); that the log leaf of (session, position, entry_hash) is at
// the receipt's index in the checkpoint's tree; that the signed response,
// if any, verifies and published that entry_hash; that the policy
// references are those the entry cites; and, given a newer checkpoint,
// that the log grew from the receipt's checkpoint to it without a rewrite.
//
// The extra data is not trusted for anything it claims (tlog-proof: it is
// not authenticated): every member is checked against the signed log or
// the signed response. A document that cannot be parsed, or extra data
// that is not a receipt's, is an *InputError; everything else is findings.
func VerifyReceipt(doc []byte, trust *ReceiptTrust, newer *NewerCheckpoint) (*ReceiptReport, error) {
	r, err := ParseReceipt(doc)
	if err != nil {
		return nil, err
	}
	if trust == nil {
		trust = new(ReceiptTrust)
	}
	if r.Extra == nil {
		return nil, &InputError{Line: 2, Err: errors.New("the proof has no extra line, so it names no entry: not an acsledger receipt")}
	}
	x, err := parseReceiptExtra(r.Extra)
	if err != nil {
		return nil, &InputError{Line: 2, Err: err}
	}
	e, err := acs.ParseEntry(x.Entry)
	if err != nil {
		return nil, &InputError{Line: 2, Err: fmt.Errorf("extra data: entry: %w", err)}
	}
	rep := &ReceiptReport{
		SessionID: x.SessionID, Position: x.Position, LeafIndex: r.Index,
		EntryID: e.EntryID, StepID: e.StepID, StepType: e.StepType, Timestamp: e.Timestamp,
		Decision: entryDisposition(e.Content), PolicyReferences: x.PolicyReferences,
		Response: x.Response != nil, TimestampToken: x.TimestampToken != nil,
	}
	add := func(f Finding) {
		f.EntryIndex, f.EntryID, f.StepID = 0, e.EntryID, e.StepID
		rep.Findings = append(rep.Findings, f)
	}

	cp, fs, err := VerifyCheckpoint(r.Checkpoint, &trust.Checkpoint, "checkpoint")
	if err != nil {
		return nil, &InputError{Line: checkpointLine(doc), Err: fmt.Errorf("checkpoint: %w", err)}
	}
	rep.Findings = append(rep.Findings, fs...)
	rep.TreeSize, rep.Origin = cp.Size, cp.Origin

	recomputed, hashEdited := checkReceiptEntry(e, x.SessionID, add)
	rep.EntryHash = recomputed.String()

	// The leaf commits to (session, position, entry_hash): a receipt
	// moved to another index, session or position leads to another root.
	leaf, err := LeafHash(x.SessionID, x.Position, recomputed)
	if err != nil {
		return nil, &InputError{Line: 2, Err: fmt.Errorf("extra data: %w", err)}
	}
	if r.Index >= cp.Size {
		err = fmt.Errorf("leaf index %d is outside a tree of %d leaves", r.Index, cp.Size)
	} else {
		err = VerifyInclusion(leaf, r.Index, cp.Size, r.Proof, cp.Root)
	}
	if err != nil {
		add(Finding{Code: CodeInclusionProofInvalid, Expected: recomputed.String(), Where: "inclusion proof",
			Message: fmt.Sprintf("The inclusion proof does not lead from the leaf of session %q position %d (leaf index %d) to the root of the checkpoint of size %d: %v.", x.SessionID, x.Position, r.Index, cp.Size, err)})
	}

	rep.Notices = append(rep.Notices, checkReceiptResponse(x, e, recomputed, hashEdited, trust, add)...)

	if cited := EntryPolicyRefs(e.Content); !slices.Equal(cited, x.PolicyReferences) {
		add(Finding{Code: CodeReceiptPolicyMismatch, Expected: refsString(cited), Actual: refsString(x.PolicyReferences),
			Message: "The receipt's policy_references are not the policy versions the entry's decision cites."})
	}

	rep.Notices = append(rep.Notices, checkReceiptTimestamp(x.TimestampToken, r.Checkpoint, cp.Size, trust, rep)...)

	if newer != nil {
		rep.Findings = append(rep.Findings, checkNewer(cp, newer, trust, rep)...)
	}
	rep.Verified = len(rep.Findings) == 0
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

// checkReceiptEntry recomputes the entry's hash, adding entry_hash_mismatch
// when it is not the stated one (reported true), and
// receipt_session_mismatch when the entry names another session than the
// receipt's.
func checkReceiptEntry(e *acs.Entry, sessionID string, add func(Finding)) (acs.Hash, bool) {
	// ACS §8.2: the hash is recomputed from the entry, never taken from it.
	recomputed := acs.EntryHash(e.Content, e.PreviousHash)
	hashEdited := e.EntryHash == nil || *e.EntryHash != recomputed
	if hashEdited {
		stated := ""
		if e.EntryHash != nil {
			stated = e.EntryHash.String()
		}
		add(Finding{Code: CodeEntryHashMismatch, Expected: recomputed.String(), Actual: stated,
			Message: fmt.Sprintf("The entry's content and previous_hash hash to %s, not to its stated entry_hash %s.", recomputed, orNone(stated))})
	}
	if sid, ok := canonicalString(acs.CanonicalMember(e.Content, "session_id")); ok && sid != sessionID {
		add(Finding{Code: CodeReceiptSessionMismatch, Expected: sessionID, Actual: sid,
			Message: fmt.Sprintf("The receipt is for session %q, but its entry names session %q.", sessionID, sid)})
	}
	return recomputed, hashEdited
}

// parseReceiptExtra decodes the extra data, which must be one JSON object
// in RFC 8785 form with no member beyond the format's.
func parseReceiptExtra(b []byte) (*ReceiptExtra, error) {
	canon, err := acs.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("extra data: %w", err)
	}
	if !bytes.Equal(canon, b) {
		return nil, errors.New("extra data is not in RFC 8785 form")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var x ReceiptExtra
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("extra data: %w", err)
	}
	switch {
	case x.Format != ReceiptFormat:
		return nil, fmt.Errorf("extra data: format %q, want %q", x.Format, ReceiptFormat)
	case x.Version != ReceiptVersion:
		return nil, fmt.Errorf("extra data: version %d, want %d", x.Version, ReceiptVersion)
	case x.SessionID == "":
		return nil, errors.New("extra data: session_id is missing")
	case len(x.Entry) == 0 || x.Entry[0] != '{':
		return nil, errors.New("extra data: entry is missing or not an object")
	case x.Response != nil && x.Response[0] != '{':
		return nil, errors.New("extra data: response is not an object")
	case x.PolicyReferences == nil:
		return nil, errors.New("extra data: policy_references is missing")
	case x.TimestampToken != nil && len(x.TimestampToken) == 0:
		return nil, errors.New("extra data: timestamp_token is empty")
	}
	// JSON base64 decoding forgives non-zero padding bits and escaped
	// line breaks, so timestamp_token could be spelled several ways: the
	// extra data must be exactly what its decoded members encode to.
	if x.TimestampToken != nil {
		again, err := json.Marshal(&x)
		if err == nil {
			again, err = acs.Canonicalize(again)
		}
		if err != nil || !bytes.Equal(again, b) {
			return nil, errors.New("extra data: timestamp_token is not standard base64 in its one canonical spelling")
		}
	}
	return &x, nil
}

// checkReceiptResponse checks the signed response against the entry: its
// signature with the trusted keys, and the chain_hash it published.
func checkReceiptResponse(x *ReceiptExtra, e *acs.Entry, head acs.Hash, hashEdited bool, trust *ReceiptTrust, add func(Finding)) []Finding {
	if x.Response == nil {
		if contentBearing(e.StepType) {
			add(Finding{Code: CodeEntryWithoutResponse, Expected: head.String(),
				Message: fmt.Sprintf("The receipt carries no signed response for this %s step, so nothing outside the ledger confirms its head.", e.StepType)})
		}
		return nil
	}
	if trust.ResponseKeys == nil {
		// Without a key nothing authenticates the response; its head is
		// still compared, as a consistency check of the receipt.
		var notices []Finding
		notices = append(notices, Finding{Code: CodeResponseNotChecked, EntryIndex: 0, EntryID: e.EntryID, StepID: e.StepID,
			Message: "No response key was given (--trust), so the response's signature was not checked."})
		canon, err := acs.Canonicalize(x.Response)
		if err == nil {
			res := acs.CanonicalMember(canon, "result")
			rid, _ := canonicalString(acs.CanonicalMember(res, "request_id"))
			ch, ok := canonicalString(acs.CanonicalMember(res, "chain_hash"))
			if rid != e.StepID || (ok && ch != head.String()) {
				add(Finding{Code: CodeChainMismatch, Expected: ch, Actual: head.String(),
					Message: fmt.Sprintf("The response answers request %q with chain_hash %q, not this entry's step %q and head %s.", rid, ch, e.StepID, head)})
			}
		}
		return notices
	}
	hc := NewHeadChecker(trust.ResponseKeys, x.SessionID)
	fs, notices, err := hc.AddResponse(x.Response)
	if err != nil {
		add(Finding{Code: CodeResponseSignatureInvalid, Expected: "a valid signature", Where: "response",
			Message: fmt.Sprintf("The response cannot be read as a signed ACS response: %v.", err)})
		return notices
	}
	for _, f := range fs {
		add(f)
	}
	for _, f := range hc.CheckEntry(0, e, head, hashEdited) {
		add(f)
	}
	for _, f := range hc.Finish() {
		add(f)
	}
	return notices
}

// checkReceiptTimestamp checks the receipt's time-stamp token against its
// checkpoint note and the trusted TSA certificates, adding the findings
// to rep and returning the notices.
func checkReceiptTimestamp(token, checkpoint []byte, size uint64, trust *ReceiptTrust, rep *ReceiptReport) []Finding {
	const where = "extra data: timestamp_token"
	mk := func(code, expected, msg string) Finding {
		return Finding{Code: code, EntryIndex: -1, Where: where, Expected: expected, Message: msg}
	}
	if token == nil {
		if trust.RequireTimestamp {
			f := mk(CodeTimestampMissing, fmt.Sprintf("a valid time-stamp of checkpoint %d", size),
				fmt.Sprintf("A time-stamp is required, and the receipt carries none for its checkpoint %d.", size))
			f.Where = "checkpoint"
			rep.Findings = append(rep.Findings, f)
		}
		return nil
	}
	if trust.TSARoots == nil {
		if trust.RequireTimestamp {
			rep.Findings = append(rep.Findings, mk(CodeTimestampInvalid, "a TSA certificate",
				fmt.Sprintf("The time-stamp of checkpoint %d cannot be checked: no TSA certificate was given (acsverify --tsa-cert).", size)),
				mk(CodeTimestampMissing, fmt.Sprintf("a valid time-stamp of checkpoint %d", size),
					fmt.Sprintf("A time-stamp is required, and checkpoint %d has no valid one.", size)))
			return nil
		}
		return []Finding{mk(CodeTimestampNotChecked, "",
			fmt.Sprintf("The receipt carries a time-stamp of checkpoint %d, but no TSA certificate was given (--tsa-cert), so it was not checked and its time is not reported.", size))}
	}
	when, err := CheckTimestampToken(token, checkpoint, trust.TSARoots)
	if err != nil {
		rep.Findings = append(rep.Findings, mk(CodeTimestampInvalid, fmt.Sprintf("a time-stamp of checkpoint %d by a trusted TSA", size),
			fmt.Sprintf("The time-stamp of checkpoint %d does not verify: %v.", size, err)))
		if trust.RequireTimestamp {
			rep.Findings = append(rep.Findings, mk(CodeTimestampMissing, fmt.Sprintf("a valid time-stamp of checkpoint %d", size),
				fmt.Sprintf("A time-stamp is required, and checkpoint %d has no valid one.", size)))
		}
		return nil
	}
	rep.Timestamps = []StampedCheckpoint{{TreeSize: size, Time: when}}
	return nil
}

// checkNewer checks that newer extends the receipt's checkpoint cp.
func checkNewer(cp Checkpoint, newer *NewerCheckpoint, trust *ReceiptTrust, rep *ReceiptReport) []Finding {
	ncp, fs, err := VerifyCheckpoint(newer.Signed, &trust.Checkpoint, "newer checkpoint")
	mk := func(code, expected, actual, msg string) Finding {
		return Finding{Code: code, EntryIndex: -1, Where: "newer checkpoint", Expected: expected, Actual: actual, Message: msg}
	}
	if err != nil {
		return append(fs, mk(CodeCheckpointSignatureInvalid, "a c2sp.org/tlog-checkpoint", "", fmt.Sprintf("The newer checkpoint cannot be read: %v.", err)))
	}
	rep.NewerTreeSize = ncp.Size
	switch {
	case ncp.Origin != cp.Origin:
		fs = append(fs, mk(CodeLogFork, cp.Origin, ncp.Origin, fmt.Sprintf("The newer checkpoint is of log %q, the receipt's of log %q.", ncp.Origin, cp.Origin)))
	case ncp.Size < cp.Size:
		fs = append(fs, mk(CodeLogFork, ">= "+strconv.FormatUint(cp.Size, 10), strconv.FormatUint(ncp.Size, 10),
			fmt.Sprintf("The newer checkpoint is of a smaller tree (%d leaves) than the receipt's (%d).", ncp.Size, cp.Size)))
	case ncp.Size == cp.Size && ncp.Root != cp.Root:
		fs = append(fs, mk(CodeLogFork, base64.StdEncoding.EncodeToString(cp.Root[:]), base64.StdEncoding.EncodeToString(ncp.Root[:]),
			fmt.Sprintf("The two checkpoints are of the same size %d with different roots: the log forked.", cp.Size)))
	default:
		if err := VerifyConsistency(cp.Size, ncp.Size, newer.Consistency, cp.Root, ncp.Root); err != nil {
			fs = append(fs, mk(CodeConsistencyProofInvalid, fmt.Sprintf("%d..%d", cp.Size, ncp.Size), "",
				fmt.Sprintf("The tree of the newer checkpoint (%d leaves) is not proven to extend the receipt's (%d leaves): %v.", ncp.Size, cp.Size, err)))
		}
	}
	return fs
}

// entryDisposition is the verdict an entry records: its decision's
// disposition, or a decision given as a plain string.
func entryDisposition(content []byte) string {
	d := acs.CanonicalMember(content, "decision")
	if s, ok := canonicalString(d); ok {
		return s
	}
	s, _ := canonicalString(acs.CanonicalMember(d, "disposition"))
	return s
}

func refsString(refs []ReceiptPolicyRef) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = r.PolicyID + "@" + r.PolicyVersion + "#" + r.RuleID
	}
	return strings.Join(parts, ",")
}

// checkpointLine is the 1-based line of doc where the checkpoint starts.
func checkpointLine(doc []byte) int {
	i := bytes.Index(doc, []byte("\n\n"))
	if i < 0 {
		return 1
	}
	return bytes.Count(doc[:i], []byte("\n")) + 3
}
