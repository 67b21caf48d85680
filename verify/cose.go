package verify

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/veraison/go-cose"

	"github.com/acsledger/acsledger/acs"
)

// The COSE form of a receipt (docs/receipts.md, "The COSE form") is a
// SCITT transparent statement: a COSE_Sign1 over the entry's RFC 8785
// bytes (the signed statement) whose unprotected header carries, under
// `receipts`, one [RFC 9942] receipt of inclusion of the entry's leaf in
// the log's RFC 9162 SHA-256 tree. Both are signed with the log's Ed25519
// checkpoint key.
//
// [RFC 9942]: https://www.rfc-editor.org/rfc/rfc9942
const (
	// COSE header labels. RFC 9942 §2 and IANA: receipts 394, vds 395,
	// vdp 396; RFC 9597: CWT claims 15.
	coseLabelReceipts  int64 = 394
	coseLabelVDS       int64 = 395
	coseLabelVDP       int64 = 396
	coseLabelCWTClaims int64 = 15
	// RFC 9942 §5.1: RFC9162_SHA256 is verifiable data structure 1 and
	// its inclusion proofs are under -1 of the vdp map.
	coseVDSRFC9162SHA256 int64 = 1
	coseVDPInclusion     int64 = -1
	// COSEPositionLabel is the text label of our protected header
	// parameter that names the entry's 0-based position in its session:
	// with the session (the CWT subject) and the entry hash it makes the
	// log leaf. COSE (RFC 9052 §3.1) allows text labels; no registered
	// parameter says "position in a chain".
	COSEPositionLabel = "acsledger-position"
	// COSEContentType is the statement's content type (RFC 9052 §3.1).
	COSEContentType = "application/json"
)

// coseSigPrefix starts every COSE_Sign1 ToBeSigned (RFC 9052 §4.4): an
// array of four, then the text "Signature1". A signed note's text is
// UTF-8 and cannot start with 0x84, so a message signed with this prefix
// can never be taken for a checkpoint: that is what lets the log's
// checkpoint key sign receipts too.
var coseSigPrefix = []byte("\x84\x6aSignature1")

// IsCOSESigPrefix reports whether msg is a COSE_Sign1 ToBeSigned, the only
// thing the log's key signs besides checkpoint notes.
func IsCOSESigPrefix(msg []byte) bool { return bytes.HasPrefix(msg, coseSigPrefix) }

// COSEKeyID is the COSE kid of the log key with the signed-note verifier
// key vkey: the UTF-8 bytes of its "name+hex key ID" prefix, which is how
// `acsledger log-key` output and checkpoint signature lines name it.
func COSEKeyID(vkey string) []byte {
	name, rest, _ := strings.Cut(vkey, "+")
	id, _, _ := strings.Cut(rest, "+")
	return []byte(name + "+" + id)
}

// COSEStatement is what the COSE form of one entry's receipt says: the
// entry (its RFC 8785 bytes, entry_hash and previous_hash included), its
// session and position, and its leaf's place in the tree of the
// checkpoint that first covered it.
type COSEStatement struct {
	Origin    string // the log's origin: the CWT issuer of both signatures
	SessionID string // the CWT subject of the statement
	Position  uint64
	Entry     []byte
	Index     uint64
	Size      uint64
	Proof     [][]byte
	Root      [32]byte
}

// FormatCOSEReceipt signs st as a transparent statement with the log's
// Ed25519 key (kid from [COSEKeyID]). Ed25519 and the deterministic CBOR
// encoding (RFC 8949 §4.2.1) make it the same bytes every time.
func FormatCOSEReceipt(st *COSEStatement, key crypto.Signer, kid []byte) ([]byte, error) {
	if _, ok := key.Public().(ed25519.PublicKey); !ok {
		return nil, errors.New("the COSE receipt key must be Ed25519")
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, fmt.Errorf("couldn't make a COSE signer: %w", err)
	}
	path := st.Proof
	if path == nil {
		path = [][]byte{} // a tree of one leaf: the empty path, an empty array
	}
	proof, err := coseEncMode.Marshal([]any{st.Size, st.Index, path})
	if err != nil {
		return nil, err
	}
	receipt := cose.NewSign1Message()
	receipt.Headers.Protected.SetAlgorithm(cose.AlgorithmEdDSA)
	receipt.Headers.Protected[cose.HeaderLabelKeyID] = kid
	receipt.Headers.Protected[coseLabelVDS] = coseVDSRFC9162SHA256
	receipt.Headers.Protected[coseLabelCWTClaims] = cose.CWTClaims{cose.CWTClaimIssuer: st.Origin}
	receipt.Headers.Unprotected[coseLabelVDP] = map[any]any{coseVDPInclusion: []any{proof}}
	// RFC 9942 §5.2.1: the signed payload is the tree root, detached:
	// a verifier must recompute it from the leaf and the path.
	receipt.Payload = st.Root[:]
	if err := receipt.Sign(nil, nil, signer); err != nil {
		return nil, fmt.Errorf("couldn't sign the COSE receipt: %w", err)
	}
	receipt.Payload = nil
	rb, err := receipt.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("couldn't encode the COSE receipt: %w", err)
	}

	stmt := cose.NewSign1Message()
	stmt.Headers.Protected.SetAlgorithm(cose.AlgorithmEdDSA)
	stmt.Headers.Protected[cose.HeaderLabelContentType] = COSEContentType
	stmt.Headers.Protected[cose.HeaderLabelKeyID] = kid
	stmt.Headers.Protected[coseLabelCWTClaims] = cose.CWTClaims{cose.CWTClaimIssuer: st.Origin, cose.CWTClaimSubject: st.SessionID}
	stmt.Headers.Protected[COSEPositionLabel] = st.Position
	stmt.Headers.Unprotected[coseLabelReceipts] = []any{rb}
	stmt.Payload = st.Entry
	if err := stmt.Sign(nil, nil, signer); err != nil {
		return nil, fmt.Errorf("couldn't sign the COSE statement: %w", err)
	}
	b, err := stmt.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("couldn't encode the COSE statement: %w", err)
	}
	return b, nil
}

var coseEncMode, coseDecMode = func() (cbor.EncMode, cbor.DecMode) {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	dm, err := cbor.DecOptions{
		DupMapKey:   cbor.DupMapKeyEnforcedAPF,
		IndefLength: cbor.IndefLengthForbidden,
		IntDec:      cbor.IntDecConvertSignedOrFail,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return em, dm
}()

// IsCOSE reports whether doc starts as a tagged COSE_Sign1 (RFC 9052
// §4.2: tag 18, an array of four), and not as a c2sp.org/tlog-proof.
func IsCOSE(doc []byte) bool { return len(doc) >= 2 && doc[0] == 0xd2 && doc[1] == 0x84 }

// coseLogKey is one trusted log key usable for COSE: an Ed25519 note key.
type coseLogKey struct {
	kid []byte
	pub ed25519.PublicKey
}

func coseLogKeys(vkeys []string) []coseLogKey {
	var out []coseLogKey
	for _, v := range vkeys {
		if _, err := NoteVerifier(v); err != nil {
			continue
		}
		parts := strings.SplitN(v, "+", 3)
		raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
		if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != noteTypeEd25519 {
			continue
		}
		out = append(out, coseLogKey{kid: COSEKeyID(v), pub: ed25519.PublicKey(raw[1:])})
	}
	return out
}

// coseInput is the InputError of the COSE form: where names the part
// ("statement" or "receipt") and at its offset in the document.
func coseInput(where string, at int, format string, a ...any) error {
	return &InputError{Member: where, Offset: int64(at), Err: fmt.Errorf(format, a...)}
}

// VerifyCOSEReceipt checks the COSE form of a receipt offline: the
// statement's payload is an entry in RFC 8785 form that hashes to its
// entry_hash (ACS §8.2); the leaf of (the statement's session, position,
// recomputed entry_hash) leads through the RFC 9942 receipt's inclusion
// path (RFC 9162 §2.1.3.2) to a root on which the receipt's signature by
// a trusted log key (trust.Checkpoint.LogKeys, Ed25519 only) verifies;
// and the statement's own signature verifies under the same key.
//
// A document that is not a transparent statement of this shape is an
// *InputError; a broken hash, proof or signature is a finding. The
// response, witness and time-stamp checks of the tlog-proof form have no
// counterpart: the COSE form carries none of them.
func VerifyCOSEReceipt(doc []byte, trust *ReceiptTrust) (*ReceiptReport, error) {
	if trust == nil {
		trust = new(ReceiptTrust)
	}
	if len(doc) > MaxReceiptSize {
		return nil, coseInput("statement", 0, "the receipt is larger than %d bytes", MaxReceiptSize)
	}
	var stmt cose.Sign1Message
	if err := stmt.UnmarshalCBOR(doc); err != nil {
		return nil, coseInput("statement", 0, "not a tagged COSE_Sign1: %v", err)
	}
	st, err := coseStatementHeaders(&stmt)
	if err != nil {
		return nil, err
	}
	rs, ok := stmt.Headers.Unprotected[coseLabelReceipts].([]any)
	if !ok || len(rs) != 1 {
		return nil, coseInput("statement", 0, "the unprotected header must hold one receipt under receipts (394)")
	}
	rb, ok := rs[0].([]byte)
	if !ok {
		return nil, coseInput("receipt", 0, "the receipt is not a byte string")
	}
	at := max(bytes.Index(doc, rb), 0)
	var receipt cose.Sign1Message
	if err := receipt.UnmarshalCBOR(rb); err != nil {
		return nil, coseInput("receipt", at, "not a tagged COSE_Sign1: %v", err)
	}
	if receipt.Payload != nil {
		return nil, coseInput("receipt", at, "the payload must be detached (nil): RFC 9942 §5.2.1 has the verifier recompute the root")
	}
	rkid, err := coseReceiptHeaders(&receipt, st, at)
	if err != nil {
		return nil, err
	}
	proof, err := coseInclusionProof(&receipt, at)
	if err != nil {
		return nil, err
	}

	// The payload: the entry, in RFC 8785 form, with its chain links.
	canon, err := acs.Canonicalize(stmt.Payload)
	if err != nil || !bytes.Equal(canon, stmt.Payload) {
		return nil, coseInput("statement", 0, "the payload is not a JSON entry in RFC 8785 form")
	}
	e, err := acs.ParseEntry(stmt.Payload)
	if err != nil {
		return nil, coseInput("statement", 0, "payload: entry: %v", err)
	}
	rep := &ReceiptReport{
		SessionID: st.SessionID, Position: st.Position, LeafIndex: proof.Index, TreeSize: proof.Size, Origin: st.Origin,
		EntryID: e.EntryID, StepID: e.StepID, StepType: e.StepType, Timestamp: e.Timestamp,
		Decision: entryDisposition(e.Content), PolicyReferences: EntryPolicyRefs(e.Content),
	}
	add := func(f Finding) {
		f.EntryIndex, f.EntryID, f.StepID = 0, e.EntryID, e.StepID
		rep.Findings = append(rep.Findings, f)
	}

	recomputed, _ := checkReceiptEntry(e, st.SessionID, add)
	rep.EntryHash = recomputed.String()

	// RFC 9942 §5.2.1: apply the inclusion path to the leaf; the result
	// is the root the receipt's signature must cover.
	leaf, err := LeafHash(st.SessionID, st.Position, recomputed)
	if err != nil {
		return nil, coseInput("statement", 0, "%v", err)
	}
	root, perr := RootFromInclusion(leaf, proof.Index, proof.Size, proof.Path)
	if perr != nil {
		add(Finding{Code: CodeInclusionProofInvalid, Expected: recomputed.String(), Where: "receipt",
			Message: fmt.Sprintf("The inclusion path does not lead from the leaf of session %q position %d (leaf index %d) to a root of a tree of %d leaves: %v.", st.SessionID, st.Position, proof.Index, proof.Size, perr)})
	}

	keys := coseLogKeys(trust.Checkpoint.LogKeys)
	if len(keys) == 0 {
		return nil, errors.New("no Ed25519 log key was given (--log-key): the COSE form is signed with the log's Ed25519 checkpoint key")
	}
	var key *coseLogKey
	for i := range keys {
		if bytes.Equal(keys[i].kid, rkid) {
			key = &keys[i]
		}
	}
	if key == nil {
		add(Finding{Code: CodeCOSESignatureInvalid, Where: "receipt", Expected: string(keys[0].kid), Actual: string(rkid),
			Message: fmt.Sprintf("The receipt is signed by key %q, which is none of the trusted log keys.", rkid)})
	} else {
		v, _ := cose.NewVerifier(cose.AlgorithmEdDSA, key.pub)
		if perr == nil {
			receipt.Payload = root[:]
			if err := receipt.Verify(nil, v); err != nil {
				add(Finding{Code: CodeCOSESignatureInvalid, Where: "receipt", Expected: "a signature by " + string(key.kid) + " over the recomputed root",
					Message: fmt.Sprintf("The receipt's signature does not verify over the root %x that its inclusion path leads to: the path, the tree size, the leaf index, the entry or the signature was changed.", root)})
			}
		}
		if err := stmt.Verify(nil, v); err != nil {
			add(Finding{Code: CodeCOSESignatureInvalid, Where: "statement", Expected: "a signature by " + string(key.kid),
				Message: "The statement's signature does not verify: its protected header or its entry was changed."})
		}
	}
	rep.Verified = len(rep.Findings) == 0
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	return rep, nil
}

// coseStatementHeaders reads the statement's protected header: EdDSA,
// application/json, a kid, CWT claims with iss and sub, and the position.
func coseStatementHeaders(m *cose.Sign1Message) (*COSEStatement, error) {
	h := m.Headers.Protected
	if alg, err := h.Algorithm(); err != nil || alg != cose.AlgorithmEdDSA {
		return nil, coseInput("statement", 0, "the protected header's alg must be EdDSA (-8)")
	}
	if ct, ok := h[cose.HeaderLabelContentType].(string); !ok || ct != COSEContentType {
		return nil, coseInput("statement", 0, "the protected header's content type must be %q", COSEContentType)
	}
	if _, ok := h[cose.HeaderLabelKeyID].([]byte); !ok {
		return nil, coseInput("statement", 0, "the protected header has no kid")
	}
	claims, ok := h[coseLabelCWTClaims].(map[any]any)
	if !ok {
		return nil, coseInput("statement", 0, "the protected header has no CWT claims (15)")
	}
	iss, ok1 := claims[cose.CWTClaimIssuer].(string)
	sub, ok2 := claims[cose.CWTClaimSubject].(string)
	if !ok1 || !ok2 || iss == "" || sub == "" || len(claims) != 2 {
		return nil, coseInput("statement", 0, "the CWT claims must be exactly iss (1) and sub (2), both non-empty text")
	}
	pos, ok := h[COSEPositionLabel].(int64)
	if !ok || pos < 0 {
		return nil, coseInput("statement", 0, "the protected header has no %q unsigned integer", COSEPositionLabel)
	}
	if len(h) != 5 {
		return nil, coseInput("statement", 0, "the protected header has %d parameters, want alg, content type, kid, CWT claims and %s", len(h), COSEPositionLabel)
	}
	if len(m.Headers.Unprotected) != 1 {
		return nil, coseInput("statement", 0, "the unprotected header holds more than the receipts")
	}
	return &COSEStatement{Origin: iss, SessionID: sub, Position: uint64(pos)}, nil
}

// coseReceiptHeaders reads the receipt's protected header: EdDSA, a kid,
// vds RFC9162_SHA256 and the log's origin as issuer. It returns the kid.
func coseReceiptHeaders(m *cose.Sign1Message, st *COSEStatement, at int) ([]byte, error) {
	h := m.Headers.Protected
	if alg, err := h.Algorithm(); err != nil || alg != cose.AlgorithmEdDSA {
		return nil, coseInput("receipt", at, "the protected header's alg must be EdDSA (-8)")
	}
	if vds, ok := h[coseLabelVDS].(int64); !ok || vds != coseVDSRFC9162SHA256 {
		return nil, coseInput("receipt", at, "the protected header's vds (395) must be RFC9162_SHA256 (1)")
	}
	kid, ok := h[cose.HeaderLabelKeyID].([]byte)
	if !ok {
		return nil, coseInput("receipt", at, "the protected header has no kid")
	}
	claims, ok := h[coseLabelCWTClaims].(map[any]any)
	if iss, ok2 := claims[cose.CWTClaimIssuer].(string); !ok || !ok2 || len(claims) != 1 || iss != st.Origin {
		return nil, coseInput("receipt", at, "the CWT claims must be exactly iss (1), the statement's issuer %q", st.Origin)
	}
	if len(h) != 4 {
		return nil, coseInput("receipt", at, "the protected header has %d parameters, want alg, kid, vds and CWT claims", len(h))
	}
	return kid, nil
}

// RootFromInclusion is the root an RFC 9162 §2.1.3.2 inclusion path leads
// to from leafHash at index in a tree of size leaves.
func RootFromInclusion(leafHash acs.Hash, index, size uint64, path [][]byte) ([32]byte, error) {
	got, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leafHash[:], path)
	if err != nil {
		return [32]byte{}, err
	}
	return [32]byte(got), nil
}

// coseProof is one RFC9162_SHA256 inclusion proof (RFC 9942 §5.2).
type coseProof struct {
	_     struct{} `cbor:",toarray"`
	Size  uint64
	Index uint64
	Path  [][]byte
}

// coseInclusionProof reads the receipt's one inclusion proof from vdp.
func coseInclusionProof(m *cose.Sign1Message, at int) (*coseProof, error) {
	if len(m.Headers.Unprotected) != 1 {
		return nil, coseInput("receipt", at, "the unprotected header must hold vdp (396) and nothing else")
	}
	vdp, ok := m.Headers.Unprotected[coseLabelVDP].(map[any]any)
	if !ok || len(vdp) != 1 {
		return nil, coseInput("receipt", at, "vdp (396) must be a map holding only inclusion proofs (-1)")
	}
	ps, ok := vdp[coseVDPInclusion].([]any)
	if !ok || len(ps) != 1 {
		return nil, coseInput("receipt", at, "vdp must hold exactly one inclusion proof")
	}
	pb, ok := ps[0].([]byte)
	if !ok {
		return nil, coseInput("receipt", at, "the inclusion proof is not a byte string")
	}
	var p coseProof
	if err := coseDecMode.Unmarshal(pb, &p); err != nil {
		return nil, coseInput("receipt", at, "the inclusion proof is not [tree_size, leaf_index, [path]]: %v", err)
	}
	if p.Path == nil || len(p.Path) > maxProofHashes {
		return nil, coseInput("receipt", at, "the inclusion path must be an array of at most %d hashes", maxProofHashes)
	}
	for i, h := range p.Path {
		if len(h) != sha256.Size {
			return nil, coseInput("receipt", at, "inclusion path hash %d is %d bytes, want 32", i, len(h))
		}
	}
	return &p, nil
}
