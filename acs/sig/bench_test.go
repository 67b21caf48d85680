package sig_test

import (
	"crypto/sha256"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// BenchmarkAlgorithms signs and verifies the signed input of a small
// request envelope with every algorithm. The baseline sub-benchmark hashes
// the same input with SHA-256 in the same run, so figures can be read as
// multiples of it.
//
//	go test -run XXX -bench Algorithms -benchtime 1s ./acs/sig/
func BenchmarkAlgorithms(b *testing.B) {
	msg, err := acs.Canonicalize([]byte(requestEnvelope))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-sha256", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			sha256.Sum256(msg)
		}
	})
	for _, alg := range sig.Algorithms() {
		k := testKey(b, alg)
		s := signer(b, k)
		v, err := k.Public().Verifier(session)
		if err != nil {
			b.Fatal(err)
		}
		value, err := s.Sign(msg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(alg)+"/sign", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Sign(msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(value)), "sig-bytes")
		})
		b.Run(string(alg)+"/verify", func(b *testing.B) {
			for b.Loop() {
				if err := v.Verify(msg, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEnvelope is the whole path a Guardian takes per response with
// the HMAC baseline: derive the session key, canonicalize, sign, insert;
// and a verifier's: canonicalize, split, verify. The baseline is
// canonicalizing the same envelope once.
func BenchmarkEnvelope(b *testing.B) {
	env := []byte(resultEnvelope)
	k := testKey(b, sig.HMACSHA256)
	set := keySet(b, k)
	signed, err := sig.SignEnvelope(env, sig.Result, signer(b, k))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-canonicalize", func(b *testing.B) {
		for b.Loop() {
			if _, err := acs.Canonicalize(env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("HMAC-SHA256/sign-envelope", func(b *testing.B) {
		for b.Loop() {
			s, err := k.Signer(session)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sig.SignEnvelope(env, sig.Result, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("HMAC-SHA256/verify-envelope", func(b *testing.B) {
		for b.Loop() {
			if _, err := sig.VerifyEnvelope(signed, set, session); err != nil {
				b.Fatal(err)
			}
		}
	})
}
