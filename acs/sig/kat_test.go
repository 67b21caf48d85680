package sig

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
)

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readCases reads the "cases" array of a JSON file, which must hold want.
func readCases[C any](t *testing.T, path string, want int) []C {
	t.Helper()
	var f struct{ Cases []C }
	readJSON(t, path, &f)
	if len(f.Cases) != want {
		t.Fatalf("%s: %d cases, want %d", path, len(f.Cases), want)
	}
	return f.Cases
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestRFC4231 checks the MAC under the HMAC-SHA256 signer against the
// RFC 4231 test cases.
func TestRFC4231(t *testing.T) {
	type kat struct {
		Name string
		Key  string `json:"key_hex"`
		Data string `json:"data_hex"`
		MAC  string `json:"mac_hex"`
	}
	for _, c := range readCases[kat](t, "testdata/rfc4231.json", 6) {
		got := macSHA256(unhex(t, c.Key), unhex(t, c.Data))
		if !bytes.Equal(got, unhex(t, c.MAC)) {
			t.Errorf("%s: MAC %x, want %s", c.Name, got, c.MAC)
		}
		h := &hmacKey{keyID: "k", key: unhex(t, c.Key)}
		if err := h.Verify(unhex(t, c.Data), unhex(t, c.MAC)); err != nil {
			t.Errorf("%s: Verify: %v", c.Name, err)
		}
	}
}

// TestRFC5869 checks crypto/hkdf, which session keys use, against RFC 5869,
// and sessionKey against test case A.3 (empty salt, as our derivation; its
// 32-byte output is the first 32 bytes of the 42-byte OKM).
func TestRFC5869(t *testing.T) {
	type kat struct {
		Name   string
		IKM    string `json:"ikm_hex"`
		Salt   string `json:"salt_hex"`
		Info   string `json:"info_hex"`
		Length int
		PRK    string `json:"prk_hex"`
		OKM    string `json:"okm_hex"`
	}
	cases := readCases[kat](t, "testdata/rfc5869.json", 2)
	for _, c := range cases {
		prk, err := hkdf.Extract(sha256.New, unhex(t, c.IKM), unhex(t, c.Salt))
		if err != nil || !bytes.Equal(prk, unhex(t, c.PRK)) {
			t.Errorf("%s: PRK %x (%v), want %s", c.Name, prk, err, c.PRK)
		}
		okm, err := hkdf.Key(sha256.New, unhex(t, c.IKM), unhex(t, c.Salt), string(unhex(t, c.Info)), c.Length)
		if err != nil || !bytes.Equal(okm, unhex(t, c.OKM)) {
			t.Errorf("%s: OKM %x (%v), want %s", c.Name, okm, err, c.OKM)
		}
	}
	a3 := cases[1]
	// sessionKey refuses an empty session_id on purpose; A.3's empty info
	// is reached through the unexported derivation with a non-empty one
	// only, so check the refusal and derive A.3 directly.
	if _, err := sessionKey(unhex(t, a3.IKM), ""); err != ErrSessionRequired {
		t.Errorf("sessionKey with empty session: %v, want ErrSessionRequired", err)
	}
	k, err := hkdf.Key(sha256.New, unhex(t, a3.IKM), nil, "", 32)
	if err != nil || !bytes.Equal(k, unhex(t, a3.OKM)[:32]) {
		t.Errorf("A.3 with nil salt, L=32: %x, want prefix of %s", k, a3.OKM)
	}
}

// TestHMACVectors replays hmac_vectors.json, made by gen_hmac_vectors.go
// without package sig.
func TestHMACVectors(t *testing.T) {
	var vs []struct {
		Name           string `json:"name"`
		KeyID          string `json:"key_id"`
		IKM            string `json:"ikm_hex"`
		SessionID      string `json:"session_id"`
		SessionKey     string `json:"session_key_hex"`
		Member         string `json:"member"`
		Envelope       string `json:"envelope"`
		SignedInput    string `json:"signed_input"`
		SignatureValue string `json:"signature_value"`
		SignedEnvelope string `json:"signed_envelope"`
	}
	readJSON(t, "testdata/hmac_vectors.json", &vs)
	if len(vs) < 4 {
		t.Fatalf("%d vectors, want at least 4", len(vs))
	}
	members := map[string]Member{"params": Params, "result": Result, "error": ErrorMember}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			m := members[v.Member]
			key, err := NewHMACKey(v.KeyID, unhex(t, v.IKM))
			if err != nil {
				t.Fatal(err)
			}
			sk, err := sessionKey(unhex(t, v.IKM), v.SessionID)
			if err != nil || hex.EncodeToString(sk) != v.SessionKey {
				t.Fatalf("session key %x (%v), want %s", sk, err, v.SessionKey)
			}
			in, err := SignedInput([]byte(v.Envelope), m)
			if err != nil || string(in) != v.SignedInput {
				t.Fatalf("SignedInput(envelope) = %s (%v)\nwant %s", in, err, v.SignedInput)
			}
			in, s, err := Split([]byte(v.SignedEnvelope), m)
			if err != nil || string(in) != v.SignedInput {
				t.Fatalf("SignedInput(signed envelope) = %s (%v)\nwant %s", in, err, v.SignedInput)
			}
			if s.Algorithm != HMACSHA256 || s.KeyID != v.KeyID {
				t.Errorf("extracted %+v", s)
			}
			signer, err := key.Signer(v.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			signed, err := SignEnvelope([]byte(v.Envelope), m, signer)
			if err != nil || string(signed) != v.SignedEnvelope {
				t.Fatalf("SignEnvelope = %s (%v)\nwant %s", signed, err, v.SignedEnvelope)
			}
			ks, _ := NewKeySet(key.Public())
			got, err := VerifyEnvelope([]byte(v.SignedEnvelope), ks, v.SessionID)
			if err != nil {
				t.Fatalf("VerifyEnvelope: %v", err)
			}
			if got.KeyID != v.KeyID {
				t.Errorf("verified key_id %q", got.KeyID)
			}
			if _, err := VerifyEnvelope([]byte(v.SignedEnvelope), ks, v.SessionID+"x"); err == nil {
				t.Error("verified under another session_id")
			}
		})
	}
}

// TestAsymmetricVectors verifies asym_vectors.json, signed by
// gen_asym_vectors.go with the standard library and circl directly, with
// public key files written there: it pins the value and key encodings of
// every asymmetric algorithm.
func TestAsymmetricVectors(t *testing.T) {
	var vs []struct {
		Algorithm      string          `json:"algorithm"`
		PublicKeyFile  json.RawMessage `json:"public_key_file"`
		SignedInput    string          `json:"signed_input"`
		SignedEnvelope string          `json:"signed_envelope"`
	}
	readJSON(t, "testdata/asym_vectors.json", &vs)
	seen := map[Algorithm]bool{}
	for _, v := range vs {
		t.Run(v.Algorithm, func(t *testing.T) {
			pub, err := ParsePublicKey(v.PublicKeyFile)
			if err != nil {
				t.Fatal(err)
			}
			if string(pub.Algorithm()) != v.Algorithm {
				t.Fatalf("key algorithm %s", pub.Algorithm())
			}
			seen[pub.Algorithm()] = true
			keys, _ := NewKeySet(pub)
			in, _, err := Split([]byte(v.SignedEnvelope), Result)
			if err != nil || string(in) != v.SignedInput {
				t.Fatalf("signed input %s (%v)", in, err)
			}
			if _, err := VerifyEnvelope([]byte(v.SignedEnvelope), keys, ""); err != nil {
				t.Fatalf("VerifyEnvelope: %v", err)
			}
			// One changed byte of the signed content fails.
			bad := bytes.Replace([]byte(v.SignedEnvelope), []byte(`"deny"`), []byte(`"DENY"`), 1)
			if _, err := VerifyEnvelope(bad, keys, ""); !errors.Is(err, ErrBadSignature) {
				t.Errorf("tampered envelope: %v", err)
			}
			// The public key file re-encodes to itself.
			again, err := pub.MarshalPublic()
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			json.Unmarshal(again, &a)
			json.Unmarshal(v.PublicKeyFile, &b)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("public key file does not round-trip:\n%s\n%s", again, v.PublicKeyFile)
			}
		})
	}
	for _, alg := range Algorithms() {
		if !alg.Symmetric() && !seen[alg] {
			t.Errorf("no vector for %s", alg)
		}
	}
}
