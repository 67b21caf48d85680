package indepverify_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian/internal/indepverify"
)

// TestMangling: the independent verifier must reject every single-byte
// change to a signed response that still parses, or it proves nothing.
func TestMangling(t *testing.T) {
	env := []byte(`{"jsonrpc":"2.0","id":7,"result":{"type":"final","acs_version":"0.1.0","request_id":"11111111-2222-4333-8444-555555555555","decision":"deny","reasoning":"no","chain_hash":"` + string(bytes.Repeat([]byte("ab"), 32)) + `"}}`)
	ikm := bytes.Repeat([]byte{9}, 32)
	hk, _ := sig.NewHMACKey("h", ikm)
	ek, _ := sig.GenerateKey(sig.ECDSAP256, "e")
	yk, _ := sig.GenerateKey(sig.MLDSA65ECDSAP256, "y")
	sign := func(k *sig.PrivateKey) []byte {
		s, _ := k.Signer("sess")
		out, err := sig.SignEnvelope(env, sig.Result, s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	pub := func(k *sig.PrivateKey) *indepverify.PublicKey {
		d, _ := k.Public().MarshalPublic()
		p, err := indepverify.ParsePublicKey(d)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name   string
		signed []byte
		check  func([]byte) error
	}{
		{"HMAC", sign(hk), func(b []byte) error { return indepverify.VerifyHMAC(b, "h", ikm, "sess") }},
		{"ECDSA", sign(ek), func(b []byte) error { return indepverify.Verify(b, pub(ek)) }},
		{"hybrid", sign(yk), func(b []byte) error { return indepverify.Verify(b, pub(yk)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.check(c.signed); err != nil {
				t.Fatalf("untouched envelope: %v", err)
			}
			if c.name == "HMAC" {
				if err := indepverify.VerifyHMAC(c.signed, "h", ikm, "other-session"); err == nil {
					t.Fatal("verified under another session's key")
				}
			}
			// Mangle every byte outside the signature object (the hybrid
			// value is long; its decoding is checked separately).
			sigAt := bytes.Index(c.signed, []byte(`"signature"`))
			for i := range c.signed {
				if i >= sigAt && i < sigAt+40 {
					continue
				}
				m := bytes.Clone(c.signed)
				m[i] ^= 0x01
				if !json.Valid(m) {
					continue
				}
				if err := c.check(m); err == nil {
					t.Fatalf("byte %d changed (%q), still verifies", i, m[max(0, i-10):min(len(m), i+10)])
				}
			}
		})
	}
}
