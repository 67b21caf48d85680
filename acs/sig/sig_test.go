package sig_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
)

const session = "3f1e2d4c-5b6a-4789-8abc-def012345678"

var (
	requestEnvelope = `{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{"acs_version":"0.1.0",` +
		`"request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-06-01T12:00:00Z",` +
		`"metadata":{"agent_id":"a","session_id":"` + session + `"},"payload":{"tool_name":"shell.exec","arguments":{"command":"ls"}}}}`
	resultEnvelope = `{"jsonrpc":"2.0","id":1,"result":{"type":"final","acs_version":"0.1.0",` +
		`"request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","decision":"allow",` +
		`"chain_hash":"5d41402abc4b2a76b9719d911017c592aaf4c8e5e1b1b3c0f2a4c6e8d0b2f4a6"}}`
	errorEnvelope = `{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"SIGNATURE_INVALID"}}`
)

// keys caches one generated key per algorithm: RSA and SLH-DSA keys are slow
// to make.
var (
	keysMu sync.Mutex
	keys   = map[sig.Algorithm]*sig.PrivateKey{}
)

func testKey(t testing.TB, alg sig.Algorithm) *sig.PrivateKey {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[alg]; ok {
		return k
	}
	k, err := sig.GenerateKey(alg, "test-"+strings.ToLower(string(alg)))
	if err != nil {
		t.Fatalf("GenerateKey(%s): %v", alg, err)
	}
	keys[alg] = k
	return k
}

func signer(t testing.TB, k *sig.PrivateKey) sig.Signer {
	t.Helper()
	s, err := k.Signer(session)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signX signs "x" with a test key of alg.
func signX(t testing.TB, alg sig.Algorithm) []byte {
	t.Helper()
	v, err := signer(t, testKey(t, alg)).Sign([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func keySet(t testing.TB, ks ...*sig.PrivateKey) *sig.KeySet {
	t.Helper()
	set := &sig.KeySet{}
	for _, k := range ks {
		if err := set.Add(k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	return set
}

// wantSize is the raw value size of each algorithm (ECDSA and the hybrids
// with ECDSA vary with DER encoding; 0 means "check a range instead").
var wantSize = map[sig.Algorithm]int{
	sig.HMACSHA256:   32,
	sig.RSAPSSSHA256: 384,
	sig.MLDSA44:      2420,
	sig.MLDSA65:      3309,
	sig.MLDSA87:      4627,
	sig.SLHDSA128s:   7856,
	sig.SLHDSA128f:   17088,
	// 4 + 3309 + 4 + 384
	sig.MLDSA65RSAPSSSHA256: 3701,
}

func TestRoundTripEveryAlgorithm(t *testing.T) {
	for _, alg := range sig.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			k := testKey(t, alg)
			set := keySet(t, k)
			for _, tc := range []struct {
				env string
				m   sig.Member
			}{{requestEnvelope, sig.Params}, {resultEnvelope, sig.Result}, {errorEnvelope, sig.ErrorMember}} {
				signed, err := sig.SignEnvelope([]byte(tc.env), tc.m, signer(t, k))
				if err != nil {
					t.Fatalf("SignEnvelope(%s): %v", tc.m, err)
				}
				got, err := sig.VerifyEnvelope(signed, set, session)
				if err != nil {
					t.Fatalf("VerifyEnvelope(%s): %v", tc.m, err)
				}
				if got.Algorithm != alg || got.KeyID != k.KeyID() {
					t.Errorf("verified %s/%q, want %s/%q", got.Algorithm, got.KeyID, alg, k.KeyID())
				}
				if n, ok := wantSize[alg]; ok && len(got.Value) != n {
					t.Errorf("%d-byte value, want %d", len(got.Value), n)
				}
				// The signed input is the canonical unsigned envelope.
				want, _ := acs.Canonicalize([]byte(tc.env))
				in, err := sig.SignedInput(signed, tc.m)
				if err != nil || !bytes.Equal(in, want) {
					t.Errorf("SignedInput(signed) = %s (%v), want %s", in, err, want)
				}
				// The output is canonical.
				if c, _ := acs.Canonicalize(signed); !bytes.Equal(c, signed) {
					t.Errorf("SignEnvelope output is not canonical: %s", signed)
				}
			}
			// Key files round trip: a signature by the re-read private key
			// verifies under the re-read public key.
			privJSON, err := k.MarshalPrivate()
			if err != nil {
				t.Fatal(err)
			}
			k2, err := sig.ParsePrivateKey(privJSON)
			if err != nil {
				t.Fatalf("ParsePrivateKey: %v", err)
			}
			pub := k2.Public()
			if !alg.Symmetric() {
				pubJSON, err := k.Public().MarshalPublic()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(pubJSON), "private") {
					t.Fatalf("public key file holds private material: %s", pubJSON)
				}
				if pub, err = sig.ParsePublicKey(pubJSON); err != nil {
					t.Fatalf("ParsePublicKey: %v", err)
				}
			}
			if !pub.Equal(k.Public()) {
				t.Error("re-read public key differs")
			}
			signed, err := sig.SignEnvelope([]byte(requestEnvelope), sig.Params, signer(t, k2))
			if err != nil {
				t.Fatal(err)
			}
			set2, _ := sig.NewKeySet(pub)
			if _, err := sig.VerifyEnvelope(signed, set2, session); err != nil {
				t.Errorf("signature by re-read key: %v", err)
			}
		})
	}
}

func TestECDSAValueIsDER(t *testing.T) {
	v := signX(t, sig.ECDSAP256)
	// SEQUENCE, short length, two INTEGERs: 0x30 len 0x02 ...
	if len(v) < 8 || len(v) > 72 || v[0] != 0x30 || int(v[1]) != len(v)-2 || v[2] != 0x02 {
		t.Errorf("not an ASN.1 DER ECDSA signature: %x", v)
	}
}

func TestHybridLayout(t *testing.T) {
	v := signX(t, sig.MLDSA65ECDSAP256)
	pqc, cls, err := sig.DecodeHybrid(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(pqc) != 3309 || cls[0] != 0x30 {
		t.Errorf("components %d and %d bytes (first %x), want ML-DSA-65 (3309) then DER", len(pqc), len(cls), cls[0])
	}
	if v[0] != 0 || v[1] != 0 || v[2] != 0x0c || v[3] != 0xed { // 3309 = 0x0ced, big-endian
		t.Errorf("length prefix %x, want 00000ced", v[:4])
	}
}

// mangle checks that every single-byte change of msg or of value fails
// verification.
func mangle(t *testing.T, v sig.Verifier, msg, value []byte) {
	t.Helper()
	if err := v.Verify(msg, value); err != nil {
		t.Fatalf("unmangled value does not verify: %v", err)
	}
	for _, target := range []struct {
		name string
		b    []byte
	}{{"signed input", msg}, {"value", value}} {
		for i := range target.b {
			orig := target.b[i]
			target.b[i] ^= 0x01
			err := v.Verify(msg, value)
			target.b[i] = orig
			if err == nil {
				t.Fatalf("%s byte %d flipped: still verifies", target.name, i)
			}
			if !errors.Is(err, sig.ErrBadSignature) {
				t.Fatalf("%s byte %d flipped: error %v does not wrap ErrBadSignature", target.name, i, err)
			}
		}
	}
	// Truncation and extension fail too.
	if v.Verify(msg, value[:len(value)-1]) == nil || v.Verify(msg, append(bytes.Clone(value), 0)) == nil {
		t.Fatal("truncated or extended value verifies")
	}
}

func TestMangling(t *testing.T) {
	msg, err := acs.Canonicalize([]byte(requestEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []sig.Algorithm{sig.HMACSHA256, sig.ECDSAP256, sig.MLDSA44, sig.MLDSA65ECDSAP256} {
		t.Run(string(alg), func(t *testing.T) {
			k := testKey(t, alg)
			value, err := signer(t, k).Sign(msg)
			if err != nil {
				t.Fatal(err)
			}
			v, err := k.Public().Verifier(session)
			if err != nil {
				t.Fatal(err)
			}
			mangle(t, v, bytes.Clone(msg), value)
		})
	}
}

// TestManglingEnvelope flips every byte of a signed canonical envelope:
// each change must fail, either as JSON the canonicalizer refuses or as a
// signature that no longer verifies. None may pass.
func TestManglingEnvelope(t *testing.T) {
	k := testKey(t, sig.HMACSHA256)
	set := keySet(t, k)
	for _, tc := range []struct {
		env string
		m   sig.Member
	}{{requestEnvelope, sig.Params}, {resultEnvelope, sig.Result}} {
		signed, err := sig.SignEnvelope([]byte(tc.env), tc.m, signer(t, k))
		if err != nil {
			t.Fatal(err)
		}
		for i := range signed {
			for _, x := range []byte{0x01, 0x20} {
				b := bytes.Clone(signed)
				b[i] ^= x
				if _, err := sig.VerifyEnvelope(b, set, session); err == nil {
					t.Fatalf("%s: byte %d ^ %#x still verifies: %s", tc.m, i, x, b)
				}
			}
		}
	}
}

func TestVerifyErrors(t *testing.T) {
	hk := testKey(t, sig.HMACSHA256)
	ek := testKey(t, sig.ECDSAP256)
	set := keySet(t, hk, ek)
	signed, err := sig.SignEnvelope([]byte(resultEnvelope), sig.Result, signer(t, hk))
	if err != nil {
		t.Fatal(err)
	}
	in, s, err := sig.Split(signed, sig.Result)
	if err != nil {
		t.Fatal(err)
	}
	_ = in
	value := base64.StdEncoding.EncodeToString(s.Value)
	withSig := func(sigJSON string) []byte {
		return []byte(strings.Replace(resultEnvelope, `"type":"final"`, `"type":"final","signature":`+sigJSON, 1))
	}
	tests := []struct {
		name     string
		env      []byte
		session  string
		kind     error
		code     rpcerr.Code
		mentions string
	}{
		{"missing", []byte(resultEnvelope), session, sig.ErrMissingSignature, rpcerr.SignatureInvalid, "result.signature"},
		{"unknown key", withSig(`{"algorithm":"HMAC-SHA256","key_id":"nope","value":"` + value + `"}`), session, sig.ErrUnknownKey, rpcerr.SignatureInvalid, `"nope"`},
		{"algorithm mismatch", withSig(`{"algorithm":"ECDSA-P256","key_id":"` + hk.KeyID() + `","value":"` + value + `"}`), session, sig.ErrAlgorithmMismatch, rpcerr.SignatureInvalid, "the key is HMAC-SHA256"},
		{"bad value", withSig(`{"algorithm":"ECDSA-P256","key_id":"` + ek.KeyID() + `","value":"` + value + `"}`), session, sig.ErrBadSignature, rpcerr.SignatureInvalid, ek.KeyID()},
		{"wrong session", signed, "other-session", sig.ErrBadSignature, rpcerr.SignatureInvalid, "MAC differs"},
		{"no session", signed, "", sig.ErrSessionRequired, rpcerr.InvalidParams, "session_id"},
		{"unregistered algorithm", withSig(`{"algorithm":"Ed25519","key_id":"k","value":"AAAA"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "Ed25519"},
		{"value not base64", withSig(`{"algorithm":"HMAC-SHA256","key_id":"k","value":"AA*A"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "base64"},
		{"value unpadded", withSig(`{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAA"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "base64"},
		{"value URL alphabet", withSig(`{"algorithm":"HMAC-SHA256","key_id":"k","value":"ab-_"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "base64"},
		{"value with newline", withSig(`{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAAA\nAAAA"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "line break"},
		{"key_id number", withSig(`{"algorithm":"HMAC-SHA256","key_id":7,"value":"AAAA"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, `"key_id" is not a string`},
		{"signature not object", withSig(`"AAAA"`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, "not an object"},
		{"missing value", withSig(`{"algorithm":"HMAC-SHA256","key_id":"k"}`), session, sig.ErrMalformedSignature, rpcerr.SignatureInvalid, `"value" is missing`},
		{"duplicate member", []byte(`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`), session, sig.ErrMalformedEnvelope, rpcerr.ParseError, ""},
		{"number out of range", []byte(`{"jsonrpc":"2.0","id":1e400,"result":{}}`), session, sig.ErrMalformedEnvelope, rpcerr.ParseError, ""},
		{"not an object", []byte(`[1]`), session, sig.ErrNotEnvelope, rpcerr.InvalidRequest, ""},
		{"result and error", []byte(`{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`), session, sig.ErrNotEnvelope, rpcerr.InvalidRequest, "both"},
		{"params not object", []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`), session, sig.ErrNotEnvelope, rpcerr.InvalidRequest, "params is not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sig.VerifyEnvelope(tt.env, set, tt.session)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error %v, want %v", err, tt.kind)
			}
			if c := rpcerr.CodeOf(err); c != tt.code {
				t.Errorf("code %v, want %v", c, tt.code)
			}
			if !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("error %q does not mention %q", err, tt.mentions)
			}
			var e *sig.Error
			if !errors.As(err, &e) {
				t.Errorf("error is not a *sig.Error")
			}
		})
	}
}

func TestSignEnvelopeRefusesSigned(t *testing.T) {
	s := signer(t, testKey(t, sig.HMACSHA256))
	signed, err := sig.SignEnvelope([]byte(requestEnvelope), sig.Params, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sig.SignEnvelope(signed, sig.Params, s); err == nil || !strings.Contains(err.Error(), "already present") {
		t.Errorf("signing twice: %v", err)
	}
	// An empty member object gets the signature as its only member.
	out, err := sig.SignEnvelope([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), sig.Result, s)
	if err != nil || !bytes.HasPrefix(out, []byte(`{"id":1,"jsonrpc":"2.0","result":{"signature":{"algorithm":"HMAC-SHA256",`)) {
		t.Errorf("signing {}: %s (%v)", out, err)
	}
}

// TestSignatureMemberOnlyRemoved checks that only the named member's
// signature is removed: a signature-named member elsewhere is signed input.
func TestSignatureMemberOnlyRemoved(t *testing.T) {
	env := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"payload":{"signature":"user data"},` +
		`"signature":{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAAA"}},"signature":"top"}`
	in, s, err := sig.Split([]byte(env), sig.Params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":1,"jsonrpc":"2.0","method":"m","params":{"payload":{"signature":"user data"}},"signature":"top"}`
	if string(in) != want || s.KeyID != "k" {
		t.Errorf("input %s, sig %+v\nwant %s", in, s, want)
	}
}

func TestDecodeHybridErrors(t *testing.T) {
	tests := []struct {
		name, hex, mentions string
	}{
		{"empty", "", "PQC length truncated at byte 0"},
		{"short first length", "000001", "PQC length truncated at byte 0"},
		{"first component truncated", "00000005aabbcc", "PQC component claims 5 bytes, 3 remain"},
		{"second length missing", "00000001aa", "classical length truncated at byte 5"},
		{"second length short", "00000001aa0000", "classical length truncated at byte 5"},
		{"second component truncated", "00000001aa00000002bb", "classical component claims 2 bytes, 1 remain"},
		{"trailing", "00000001aa00000001bbcc", "1 bytes after the classical component"},
		{"empty component", "0000000000000001bb", "PQC component is empty"},
		{"huge length", "ffffffffaa", "claims 4294967295 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustHex(t, tt.hex)
			_, _, err := sig.DecodeHybrid(b)
			if !errors.Is(err, sig.ErrHybridEncoding) || !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("DecodeHybrid(%s) = %v, want %q", tt.hex, err, tt.mentions)
			}
		})
	}
	p, c, err := sig.DecodeHybrid(mustHex(t, "00000001aa00000002bbcc"))
	if err != nil || !bytes.Equal(p, []byte{0xaa}) || !bytes.Equal(c, []byte{0xbb, 0xcc}) {
		t.Errorf("valid value: %x %x %v", p, c, err)
	}
}

// TestHybridBothComponentsChecked swaps in a valid component from another
// signature: a hybrid value passes only if both halves verify.
func TestHybridBothComponentsChecked(t *testing.T) {
	k := testKey(t, sig.MLDSA65ECDSAP256)
	s := signer(t, k)
	v, _ := k.Public().Verifier(session)
	a, _ := s.Sign([]byte("a"))
	b, _ := s.Sign([]byte("b"))
	ap, ac, _ := sig.DecodeHybrid(a)
	bp, bc, _ := sig.DecodeHybrid(b)
	if err := v.Verify([]byte("a"), sig.EncodeHybrid(ap, bc)); err == nil || !strings.Contains(err.Error(), "classical") {
		t.Errorf("wrong classical component: %v", err)
	}
	if err := v.Verify([]byte("a"), sig.EncodeHybrid(bp, ac)); err == nil || !strings.Contains(err.Error(), "ML-DSA-65") {
		t.Errorf("wrong PQC component: %v", err)
	}
	if err := v.Verify([]byte("a"), sig.EncodeHybrid(ac, ap)); err == nil {
		t.Error("components in the wrong order verify")
	}
}

func TestKeySet(t *testing.T) {
	k1 := testKey(t, sig.ECDSAP256)
	other, err := sig.GenerateKey(sig.ECDSAP256, k1.KeyID())
	if err != nil {
		t.Fatal(err)
	}
	set, err := sig.NewKeySet(k1.Public(), k1.Public())
	if err != nil || set.Len() != 1 {
		t.Fatalf("same key twice: %v, len %d", err, set.Len())
	}
	if err := set.Add(other.Public()); err == nil || !strings.Contains(err.Error(), "different") {
		t.Errorf("different key under same key_id: %v", err)
	}
	if ids := set.KeyIDs(); len(ids) != 1 || ids[0] != k1.KeyID() {
		t.Errorf("KeyIDs = %v", ids)
	}
}

func TestKeyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	h, err := sig.ParseHMACKeyFlag("guardian-hmac=000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	e := testKey(t, sig.ECDSAP256)
	m := testKey(t, sig.MLDSA65)
	if err := sig.WriteKeyDir(dir, h, e, m); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
		info, _ := en.Info()
		if strings.HasSuffix(en.Name(), ".key.json") && info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", en.Name(), info.Mode().Perm())
		}
	}
	want := "guardian-hmac.key.json test-ecdsa-p256.key.json test-ecdsa-p256.pub.json test-ml-dsa-65.key.json test-ml-dsa-65.pub.json"
	if strings.Join(names, " ") != want {
		t.Errorf("files %v\nwant %s", names, want)
	}

	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(kd.Private) != 3 || kd.KeySet.Len() != 3 {
		t.Fatalf("loaded %d private keys, %d verifying keys", len(kd.Private), kd.KeySet.Len())
	}
	for _, k := range kd.Private {
		signed, err := sig.SignEnvelope([]byte(resultEnvelope), sig.Result, signer(t, k))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sig.VerifyEnvelope(signed, keySet(t, e, m, h), session); err != nil {
			t.Errorf("%s from directory: %v", k.KeyID(), err)
		}
	}

	// Writing again refuses and leaves the files as they were.
	before, _ := os.ReadFile(filepath.Join(dir, "test-ecdsa-p256.key.json"))
	e2, _ := sig.GenerateKey(sig.ECDSAP256, "test-ecdsa-p256")
	n, _ := sig.GenerateKey(sig.ECDSAP256, "new-key")
	if err := sig.WriteKeyDir(dir, n, e2); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("overwrite: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "test-ecdsa-p256.key.json"))
	if !bytes.Equal(before, after) {
		t.Error("existing key file changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "new-key.key.json")); !os.IsNotExist(err) {
		t.Error("a refused write left new-key.key.json behind")
	}

	// A verifier's directory holds only public files.
	pubDir := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(dir, "test-ml-dsa-65.pub.json"))
	os.WriteFile(filepath.Join(pubDir, "test-ml-dsa-65.pub.json"), b, 0o644)
	os.WriteFile(filepath.Join(pubDir, "README"), []byte("ignored"), 0o644)
	kd, err = sig.LoadKeyDir(pubDir)
	if err != nil || len(kd.Private) != 0 || kd.KeySet.Len() != 1 {
		t.Fatalf("public-only dir: %v", err)
	}

	// A public file that disagrees with the private key is refused, naming
	// the file.
	os.WriteFile(filepath.Join(pubDir, "x.key.json"), mustMarshal(t, e2), 0o600)
	b, _ = e.Public().MarshalPublic()
	os.WriteFile(filepath.Join(pubDir, "y.pub.json"), b, 0o644)
	if _, err := sig.LoadKeyDir(pubDir); err == nil || !strings.Contains(err.Error(), "y.pub.json") || !strings.Contains(err.Error(), "different") {
		t.Errorf("conflicting key files: %v", err)
	}
}

func TestParseKeyFileErrors(t *testing.T) {
	e := testKey(t, sig.ECDSAP256)
	good, _ := e.MarshalPrivate()
	e2, _ := sig.GenerateKey(sig.ECDSAP256, e.KeyID())
	e2pub, _ := e2.Public().MarshalPublic()
	wrongPub := strings.Replace(string(good), publicOf(t, good), publicOf(t, e2pub), 1)
	otherPub, _ := testKey(t, sig.MLDSA44).Public().MarshalPublic()
	tests := []struct {
		name, doc, mentions string
	}{
		{"unknown member", `{"key_id":"a","algorithm":"ECDSA-P256","public":"AA==","extra":1}`, "unknown field"},
		{"bad algorithm", `{"key_id":"a","algorithm":"ecdsa-p256","private":"AA=="}`, "not in the ACS"},
		{"no key_id", `{"algorithm":"ECDSA-P256","private":"AA=="}`, "key_id"},
		{"bad base64", `{"key_id":"a","algorithm":"ECDSA-P256","private":"A"}`, "not standard base64"},
		{"garbage key", `{"key_id":"a","algorithm":"ECDSA-P256","private":"AAAA"}`, "ECDSA-P256 private key"},
		{"public mismatch", wrongPub, "not the public half"},
		{"ml-dsa seed size", `{"key_id":"a","algorithm":"ML-DSA-65","private":"AAAA"}`, "3-byte seed, want 32"},
		{"hmac short", `{"key_id":"a","algorithm":"HMAC-SHA256","private":"AAAA"}`, "want at least 16"},
		{"trailing data", string(good) + `{}`, "after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sig.ParsePrivateKey([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("ParsePrivateKey: %v, want mention of %q", err, tt.mentions)
			}
		})
	}
	// A public file of one algorithm relabelled as another is refused.
	relabelled := strings.Replace(string(otherPub), `"ML-DSA-44"`, `"ML-DSA-65"`, 1)
	if _, err := sig.ParsePublicKey([]byte(relabelled)); err == nil || !strings.Contains(err.Error(), "want 1952") {
		t.Errorf("relabelled public key: %v", err)
	}
	if _, err := sig.ParsePublicKey(good); err == nil || !strings.Contains(err.Error(), "must not hold") {
		t.Errorf("private file read as public: %v", err)
	}
}

func TestParseHMACKeyFlag(t *testing.T) {
	k, err := sig.ParseHMACKeyFlag("g1=000102030405060708090A0B0C0D0E0F")
	if err != nil || k.KeyID() != "g1" || k.Algorithm() != sig.HMACSHA256 {
		t.Fatalf("%v %v", k, err)
	}
	for in, mentions := range map[string]string{
		"noequals":                           "KEY_ID=HEX_IKM",
		"=00112233445566778899aabbccddeeff":  "empty KEY_ID",
		"g=zz112233445566778899aabbccddeeff": "not hex",
		"g=0011":                             "want at least 16",
	} {
		_, err := sig.ParseHMACKeyFlag(in)
		if err == nil || !strings.Contains(err.Error(), mentions) {
			t.Errorf("ParseHMACKeyFlag(%q) = %v, want %q", in, err, mentions)
		}
		if err != nil && strings.Contains(err.Error(), "112233") {
			t.Errorf("error leaks the IKM: %v", err)
		}
	}
}

func TestGenerateKeyRefusals(t *testing.T) {
	if _, err := sig.GenerateKey("Ed25519", "k"); err == nil {
		t.Error("unregistered algorithm accepted")
	}
	if _, err := sig.GenerateKey(sig.ECDSAP256, ""); err == nil {
		t.Error("empty key_id accepted")
	}
	if err := sig.WriteKeyDir(t.TempDir(), mustKey(t, "../evil")); err == nil || !strings.Contains(err.Error(), "file name") {
		t.Errorf("path-like key_id: %v", err)
	}
}

func mustKey(t *testing.T, id string) *sig.PrivateKey {
	k, err := sig.NewHMACKey(id, bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustMarshal(t *testing.T, k *sig.PrivateKey) []byte {
	b, err := k.MarshalPrivate()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c-'a') + 10
			default:
				t.Fatalf("bad hex %q", s)
			}
		}
		b[i] = v
	}
	return b
}

func publicOf(t *testing.T, keyFile []byte) string {
	_, rest, ok := strings.Cut(string(keyFile), `"public": "`)
	if !ok {
		t.Fatalf("no public member in %s", keyFile)
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
