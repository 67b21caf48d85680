package sig_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// FuzzDecodeHybrid: a value that decodes re-encodes to itself (one reading
// per value), and one that does not fails with ErrHybridEncoding.
func FuzzDecodeHybrid(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 0xaa, 0, 0, 0, 1, 0xbb})
	f.Add([]byte{0, 0, 0, 2, 0xaa})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(sig.EncodeHybrid(bytes.Repeat([]byte{1}, 3309), bytes.Repeat([]byte{2}, 71)))
	f.Fuzz(func(t *testing.T, v []byte) {
		p, c, err := sig.DecodeHybrid(v)
		if err != nil {
			if !errors.Is(err, sig.ErrHybridEncoding) {
				t.Fatalf("error %v is not ErrHybridEncoding", err)
			}
			return
		}
		if len(p) == 0 || len(c) == 0 {
			t.Fatal("decoded an empty component")
		}
		if !bytes.Equal(sig.EncodeHybrid(p, c), v) {
			t.Fatalf("decode/encode of %x is not the identity", v)
		}
	})
}

// FuzzSplit: whatever the envelope, Split never panics; when it succeeds
// the signed input is canonical JSON with no signature member left in the
// named object, signing it again gives back the same signed input, and the
// fresh signature verifies.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		requestEnvelope, resultEnvelope, errorEnvelope,
		`{"jsonrpc":"2.0","id":1,"result":{"signature":{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAAA"},"type":"final"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"signature":{"algorithm":"ML-DSA-65","key_id":"k","value":"AA=="},"z":[1,2]}}`,
		`{"error":{"signature":1},"id":1}`,
		`{"result":{"signature":{}}}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
	}
	hk, err := sig.NewHMACKey("k", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		f.Fatal(err)
	}
	signer, _ := hk.Signer("s")
	keys, _ := sig.NewKeySet(hk.Public())
	f.Fuzz(func(t *testing.T, env []byte, which uint8) {
		m := sig.Member(which%3 + 1)
		in, s, err := sig.Split(env, m)
		if err != nil {
			var e *sig.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *sig.Error", err)
			}
			return
		}
		c, err := acs.Canonicalize(in)
		if err != nil || !bytes.Equal(c, in) {
			t.Fatalf("signed input is not canonical: %s (%v)", in, err)
		}
		if _, s2, err := sig.Split(in, m); err != nil || s2 != nil {
			t.Fatalf("signed input still has a signature (%v, %v)", s2, err)
		}
		if s != nil && (s.KeyID == "" || len(s.Value) == 0) {
			t.Fatalf("accepted signature with empty key_id or value: %+v", s)
		}
		signed, err := sig.SignEnvelope(in, m, signer)
		if err != nil {
			t.Fatalf("SignEnvelope of a valid signed input: %v", err)
		}
		in2, _, err := sig.Split(signed, m)
		if err != nil || !bytes.Equal(in2, in) {
			t.Fatalf("re-signed envelope has input %s (%v), want %s", in2, err, in)
		}
		// Round trip: what SignEnvelope makes, VerifyEnvelope accepts, as
		// long as the envelope classifies as the member it was signed in.
		if got, err := sig.MemberOf(signed); err == nil && got == m {
			if _, err := sig.VerifyEnvelope(signed, keys, "s"); err != nil {
				t.Fatalf("VerifyEnvelope of a fresh signature: %v\n%s", err, signed)
			}
		}
	})
}
