package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/gowebpki/jcs"

	"github.com/acsledger/acsledger/verify"
)

// This file holds a second reader of the COSE form of receipts, written
// from RFC 9942 (COSE Receipts), RFC 9052 (COSE_Sign1, Sig_structure) and
// RFC 9162 §2.1.3.2 (verifying an inclusion proof) alone: it decodes the
// CBOR with fxamacker/cbor directly, recomputes the entry hash (ACS §8.2)
// and the leaf (docs/merkle-log.md) with gowebpki/jcs, walks the
// inclusion path by hand and checks both Ed25519 signatures over
// Sig_structures it encodes itself. It shares no code with verify/cose.go
// or go-cose, so the two readers agreeing is evidence that the receipts
// are what the RFC says, not only what our producer and verifier agree on.

// rfcDecMode refuses duplicate map keys and indefinite lengths, and gives
// integers as int64 where they fit.
var rfcDecMode, _ = cbor.DecOptions{
	DupMapKey:   cbor.DupMapKeyEnforcedAPF,
	IndefLength: cbor.IndefLengthForbidden,
	IntDec:      cbor.IntDecConvertSignedOrFail,
}.DecMode()

// rfcSign1 is COSE_Sign1 (RFC 9052 §4.2) without its tag.
type rfcSign1 struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected cbor.RawMessage
	Payload     cbor.RawMessage // bstr, or null when detached
	Signature   []byte
}

// rfcProven is what the independent reader established.
type rfcProven struct {
	Issuer, Session string
	Position        uint64
	EntryHash       string
	Index, Size     uint64
	Root            []byte
}

// rfcDecodeSign1 reads a COSE_Sign1_Tagged (tag 18) whole, nothing after it.
func rfcDecodeSign1(b []byte) (*rfcSign1, map[any]any, error) {
	var tag cbor.RawTag
	if err := rfcDecMode.Unmarshal(b, &tag); err != nil {
		return nil, nil, fmt.Errorf("not one CBOR item: %w", err)
	}
	if tag.Number != 18 {
		return nil, nil, fmt.Errorf("tag %d, want 18 (COSE_Sign1)", tag.Number)
	}
	var m rfcSign1
	if err := rfcDecMode.Unmarshal(tag.Content, &m); err != nil {
		return nil, nil, fmt.Errorf("not a COSE_Sign1 array: %w", err)
	}
	var prot map[any]any
	if err := rfcDecMode.Unmarshal(m.Protected, &prot); err != nil {
		return nil, nil, fmt.Errorf("protected header: %w", err)
	}
	return &m, prot, nil
}

// rfcSigStructure is the ToBeSigned of RFC 9052 §4.4 for COSE_Sign1 with
// empty external AAD.
func rfcSigStructure(protected, payload []byte) []byte {
	em, _ := cbor.CoreDetEncOptions().EncMode()
	b, err := em.Marshal([]any{"Signature1", protected, []byte{}, payload})
	if err != nil {
		panic(err)
	}
	return b
}

// rfc9162Root is RFC 9162 §2.1.3.2: the root an inclusion path leads to.
func rfc9162Root(index, size uint64, leafHash []byte, path [][]byte) ([]byte, error) {
	if index >= size {
		return nil, errors.New("leaf_index >= tree_size")
	}
	fn, sn := index, size-1
	r := leafHash
	for _, p := range path {
		if sn == 0 {
			return nil, errors.New("path longer than the tree")
		}
		if fn&1 == 1 || fn == sn {
			r = rfcNode(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = rfcNode(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return nil, errors.New("path shorter than the tree")
	}
	return r, nil
}

func rfcNode(l, r []byte) []byte {
	h := sha256.Sum256(append(append([]byte{1}, l...), r...))
	return h[:]
}

// rfcVerify checks a transparent statement with an RFC 9942 receipt under
// the Ed25519 log key pub with COSE kid kid.
func rfcVerify(doc []byte, pub ed25519.PublicKey, kid []byte) (*rfcProven, error) {
	stmt, sp, err := rfcDecodeSign1(doc)
	if err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	claims, _ := sp[int64(15)].(map[any]any)
	iss, _ := claims[int64(1)].(string)
	sub, _ := claims[int64(2)].(string)
	pos, okPos := sp["acsledger-position"].(int64)
	switch {
	case sp[int64(1)] != int64(-8):
		return nil, errors.New("statement: alg is not EdDSA")
	case sp[int64(3)] != "application/json":
		return nil, errors.New("statement: content type is not application/json")
	case !bytes.Equal(asBytes(sp[int64(4)]), kid):
		return nil, errors.New("statement: kid is not the log key's")
	case iss == "" || sub == "" || len(claims) != 2 || !okPos || pos < 0 || len(sp) != 5:
		return nil, errors.New("statement: protected header is not alg, cty, kid, CWT claims {iss, sub} and acsledger-position")
	}
	var payload []byte
	if err := rfcDecMode.Unmarshal(stmt.Payload, &payload); err != nil || payload == nil {
		return nil, errors.New("statement: the payload is not attached")
	}
	if !ed25519.Verify(pub, rfcSigStructure(stmt.Protected, payload), stmt.Signature) {
		return nil, errors.New("statement: signature does not verify")
	}
	var su map[int64]cbor.RawMessage
	if err := rfcDecMode.Unmarshal(stmt.Unprotected, &su); err != nil || len(su) != 1 {
		return nil, errors.New("statement: the unprotected header is not {394: receipts}")
	}
	var receipts [][]byte
	if err := rfcDecMode.Unmarshal(su[394], &receipts); err != nil || len(receipts) != 1 {
		return nil, errors.New("statement: receipts (394) is not one bstr")
	}

	// RFC 9942 §5.2.1: the receipt of inclusion.
	rc, rp, err := rfcDecodeSign1(receipts[0])
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	rclaims, _ := rp[int64(15)].(map[any]any)
	switch {
	case rp[int64(1)] != int64(-8):
		return nil, errors.New("receipt: alg is not EdDSA")
	case rp[int64(395)] != int64(1):
		return nil, errors.New("receipt: vds is not RFC9162_SHA256")
	case !bytes.Equal(asBytes(rp[int64(4)]), kid):
		return nil, errors.New("receipt: kid is not the log key's")
	case len(rclaims) != 1 || rclaims[int64(1)] != iss || len(rp) != 4:
		return nil, errors.New("receipt: protected header is not alg, kid, vds and CWT claims {iss}")
	case !bytes.Equal(rc.Payload, []byte{0xf6}):
		return nil, errors.New("receipt: the payload is not detached (null)")
	}
	var ru map[int64]map[int64][][]byte
	if err := rfcDecMode.Unmarshal(rc.Unprotected, &ru); err != nil || len(ru) != 1 || len(ru[396]) != 1 || len(ru[396][-1]) != 1 {
		return nil, errors.New("receipt: the unprotected header is not {396: {-1: [proof]}}")
	}
	var proof struct {
		_     struct{} `cbor:",toarray"`
		Size  uint64
		Index uint64
		Path  [][]byte
	}
	if err := rfcDecMode.Unmarshal(ru[396][-1][0], &proof); err != nil {
		return nil, fmt.Errorf("receipt: inclusion proof: %w", err)
	}
	for _, h := range proof.Path {
		if len(h) != 32 {
			return nil, errors.New("receipt: a path hash is not 32 bytes")
		}
	}

	// The entry: ACS §8.2 entry hash, then the leaf of docs/merkle-log.md.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	var stated string
	var prev []byte
	if err := json.Unmarshal(members["entry_hash"], &stated); err != nil {
		return nil, errors.New("entry: no entry_hash")
	}
	if p := members["previous_hash"]; string(p) != "null" {
		var s string
		if err := json.Unmarshal(p, &s); err != nil {
			return nil, errors.New("entry: previous_hash")
		}
		if prev, err = hex.DecodeString(s); err != nil || len(prev) != 32 {
			return nil, errors.New("entry: previous_hash is not 32 bytes of hex")
		}
	}
	delete(members, "entry_hash")
	delete(members, "previous_hash")
	content, _ := json.Marshal(members)
	canon, err := jcs.Transform(content)
	if err != nil {
		return nil, err
	}
	eh := sha256.Sum256(append(canon, prev...))
	if hex.EncodeToString(eh[:]) != stated {
		return nil, errors.New("entry: entry_hash does not match the content")
	}
	sid, _ := json.Marshal(sub)
	leaf, err := jcs.Transform(fmt.Appendf(nil, `{"v":1,"entry_hash":"%x","position":%d,"session_id":%s}`, eh, pos, sid))
	if err != nil {
		return nil, err
	}
	lh := sha256.Sum256(append([]byte{0}, leaf...))
	root, err := rfc9162Root(proof.Index, proof.Size, lh[:], proof.Path)
	if err != nil {
		return nil, fmt.Errorf("receipt: inclusion proof: %w", err)
	}
	if !ed25519.Verify(pub, rfcSigStructure(rc.Protected, root), rc.Signature) {
		return nil, errors.New("receipt: signature does not verify over the recomputed root")
	}
	return &rfcProven{Issuer: iss, Session: sub, Position: uint64(pos), EntryHash: stated, Index: proof.Index, Size: proof.Size, Root: root}, nil
}

func asBytes(v any) []byte { b, _ := v.([]byte); return b }

type coseManifest struct {
	LogKey   string `json:"log_key"`
	Origin   string `json:"origin"`
	Receipts []struct {
		File      string `json:"file"`
		SessionID string `json:"session_id"`
		Position  uint64 `json:"position"`
		EntryHash string `json:"entry_hash"`
		LeafIndex uint64 `json:"leaf_index"`
		TreeSize  uint64 `json:"tree_size"`
		Root      string `json:"root"`
	} `json:"receipts"`
}

// coseVectors reads testdata/cose (gen_cose.go) and the log's Ed25519 key.
func coseVectors(t *testing.T) (coseManifest, ed25519.PublicKey, []byte) {
	t.Helper()
	m, pub, kid := coseVectorsFromDir("testdata/cose")
	if len(m.Receipts) != 3 || pub == nil {
		t.Fatalf("manifest lists %d receipts, want 3, and log key %q must be an Ed25519 note key", len(m.Receipts), m.LogKey)
	}
	return m, pub, kid
}

func coseVectorsFromDir(dir string) (coseManifest, ed25519.PublicKey, []byte) {
	var m coseManifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil || json.Unmarshal(b, &m) != nil {
		return m, nil, nil
	}
	parts := strings.SplitN(m.LogKey, "+", 3)
	if len(parts) != 3 {
		return m, nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 1 {
		return m, nil, nil
	}
	return m, ed25519.PublicKey(raw[1:]), []byte(parts[0] + "+" + parts[1])
}

// TestCOSEReceiptVectors: both readers accept every vector and agree with
// the manifest on what it proves.
func TestCOSEReceiptVectors(t *testing.T) {
	t.Parallel()
	m, pub, kid := coseVectors(t)
	trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{m.LogKey}}}
	for _, want := range m.Receipts {
		t.Run(want.File, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join("testdata/cose", want.File))
			if err != nil {
				t.Fatal(err)
			}
			got, err := rfcVerify(doc, pub, kid)
			if err != nil {
				t.Fatalf("independent RFC 9942 reader: %v", err)
			}
			wantRoot, _ := hex.DecodeString(want.Root)
			if got.Issuer != m.Origin || got.Session != want.SessionID || got.Position != want.Position || got.EntryHash != want.EntryHash ||
				got.Index != want.LeafIndex || got.Size != want.TreeSize || !bytes.Equal(got.Root, wantRoot) {
				t.Errorf("independent reader proved %+v, manifest says %+v", got, want)
			}
			rep, err := verify.VerifyCOSEReceipt(doc, trust)
			if err != nil {
				t.Fatalf("VerifyCOSEReceipt: %v", err)
			}
			if !rep.Verified || len(rep.Findings) != 0 {
				t.Fatalf("VerifyCOSEReceipt: not verified: %+v", rep.Findings)
			}
			if rep.SessionID != want.SessionID || rep.Position != want.Position || rep.EntryHash != want.EntryHash ||
				rep.LeafIndex != want.LeafIndex || rep.TreeSize != want.TreeSize || rep.Origin != m.Origin {
				t.Errorf("VerifyCOSEReceipt reported %+v, manifest says %+v", rep, want)
			}
			if !verify.IsCOSE(doc) {
				t.Error("IsCOSE is false for a COSE receipt")
			}
		})
	}
}

// TestCOSEReceiptMangled changes every byte of every vector, three ways
// each: both readers must refuse every result (VerifyCOSEReceipt with an
// input error or a finding).
func TestCOSEReceiptMangled(t *testing.T) {
	t.Parallel()
	m, pub, kid := coseVectors(t)
	trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{m.LogKey}}}
	for _, v := range m.Receipts {
		doc, err := os.ReadFile(filepath.Join("testdata/cose", v.File))
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for i := range doc {
			for _, flip := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(doc)
				bad[i] ^= flip
				tried++
				if _, err := rfcVerify(bad, pub, kid); err == nil {
					t.Errorf("%s: byte %d ^ %#02x: the independent reader accepted it", v.File, i, flip)
				}
				rep, err := verify.VerifyCOSEReceipt(bad, trust)
				if err == nil && rep.Verified {
					t.Errorf("%s: byte %d ^ %#02x: VerifyCOSEReceipt verified it", v.File, i, flip)
				}
			}
		}
		if tried != 3*len(doc) {
			t.Fatalf("tried %d changes of %d bytes", tried, len(doc))
		}
	}
}

// TestCOSEReceiptWrongKey: a receipt checked with another log key is
// refused by both readers.
func TestCOSEReceiptWrongKey(t *testing.T) {
	t.Parallel()
	m, _, kid := coseVectors(t)
	doc, err := os.ReadFile(filepath.Join("testdata/cose", m.Receipts[1].File))
	if err != nil {
		t.Fatal(err)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)).Public().(ed25519.PublicKey)
	if _, err := rfcVerify(doc, other, kid); err == nil {
		t.Error("the independent reader accepted a receipt under another key")
	}
	otherKey := noteVKey("acsledger.test/cose", other)
	rep, err := verify.VerifyCOSEReceipt(doc, &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{otherKey}}})
	if err == nil && rep.Verified {
		t.Error("VerifyCOSEReceipt verified a receipt under a key that did not sign it")
	}
}

// TestRFC9162RootOfGeneratedTrees checks the hand-written RFC 9162
// §2.1.3.2 walk against the producer's proofs for every leaf of trees of
// 1 to 33 leaves, and that both readers accept what FormatCOSEReceipt
// makes of each (the one-leaf tree has an empty path).
func TestRFC9162RootOfGeneratedTrees(t *testing.T) {
	t.Parallel()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	pub := priv.Public().(ed25519.PublicKey)
	vkey := noteVKey("acsledger.test/trees", pub)
	kid := verify.COSEKeyID(vkey)
	trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{vkey}}}
	entry := []byte(`{"decision":"allow","entry_hash":"` + strings.Repeat("0", 64) + `","entry_id":"e","previous_hash":null,"step_id":"s","step_type":"steps/toolCallRequest"}`)
	var members map[string]any
	_ = json.Unmarshal(entry, &members)
	delete(members, "entry_hash")
	delete(members, "previous_hash")
	c, _ := json.Marshal(members)
	canon, _ := jcs.Transform(c)
	eh := sha256.Sum256(canon)
	entry = bytes.Replace(entry, []byte(strings.Repeat("0", 64)), []byte(hex.EncodeToString(eh[:])), 1)
	for size := 1; size <= 33; size++ {
		// Leaf i is the entry at position i of session "s".
		var leaves [][]byte
		for i := range size {
			lh, _ := verify.LeafHash("s", uint64(i), eh)
			leaves = append(leaves, lh[:])
		}
		for i := range size {
			p := genPath(i, leaves)
			root := genRoot(leaves)
			doc, err := verify.FormatCOSEReceipt(&verify.COSEStatement{Origin: "acsledger.test/trees", SessionID: "s", Position: uint64(i),
				Entry: entry, Index: uint64(i), Size: uint64(size), Proof: p, Root: [32]byte(root)}, priv, kid)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rfcVerify(doc, pub, kid)
			if err != nil || !bytes.Equal(got.Root, root) {
				t.Fatalf("size %d leaf %d: independent reader: %v", size, i, err)
			}
			rep, err := verify.VerifyCOSEReceipt(doc, trust)
			if err != nil || !rep.Verified {
				t.Fatalf("size %d leaf %d: VerifyCOSEReceipt: %v %+v", size, i, err, rep)
			}
		}
	}
}

// genRoot and genPath are MTH and PATH of RFC 9162 §2.1.1 and §2.1.3.1.
func genRoot(d [][]byte) []byte {
	if len(d) == 1 {
		return d[0]
	}
	k := genSplit(len(d))
	return rfcNode(genRoot(d[:k]), genRoot(d[k:]))
}

func genPath(m int, d [][]byte) [][]byte {
	if len(d) == 1 {
		return nil
	}
	k := genSplit(len(d))
	if m < k {
		return append(genPath(m, d[:k]), genRoot(d[k:]))
	}
	return append(genPath(m-k, d[k:]), genRoot(d[:k]))
}

func genSplit(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// noteVKey is the signed-note verifier key of an Ed25519 key: the key ID
// is SHA-256(name || "\n" || 0x01 || key)[:4] (c2sp.org/signed-note).
func noteVKey(name string, pub ed25519.PublicKey) string {
	id := sha256.Sum256(append([]byte(name+"\n\x01"), pub...))
	return fmt.Sprintf("%s+%x+%s", name, id[:4], base64.StdEncoding.EncodeToString(append([]byte{1}, pub...)))
}

// FuzzCOSEReceipt: whatever the bytes, VerifyCOSEReceipt returns an input
// error or a report, never panics; a report that verifies is one the
// independent reader accepts too, for the same leaf.
func FuzzCOSEReceipt(f *testing.F) {
	m, pub, kid := coseVectorsFromDir("testdata/cose")
	for _, v := range m.Receipts {
		b, err := os.ReadFile(filepath.Join("testdata/cose", v.File))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{m.LogKey}}}
	f.Fuzz(func(t *testing.T, doc []byte) {
		rep, err := verify.VerifyCOSEReceipt(doc, trust)
		if err != nil {
			var ie *verify.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("not an InputError: %v", err)
			}
			return
		}
		if !rep.Verified {
			return
		}
		got, err := rfcVerify(doc, pub, kid)
		if err != nil {
			t.Fatalf("VerifyCOSEReceipt verified what the independent reader refuses: %v", err)
		}
		if got.Session != rep.SessionID || got.Position != rep.Position || got.Index != rep.LeafIndex || got.Size != rep.TreeSize {
			t.Fatalf("the readers disagree: %+v and %+v", got, rep)
		}
	})
}
