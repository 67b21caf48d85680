package guardian

import (
	"slices"

	"github.com/acsledger/acsledger/acs/sig"
)

// mldsa65 are the algorithms that carry an ML-DSA-65 signature: ML-DSA-65
// itself and its hybrid composites (ACS §10.1).
var mldsa65 = []sig.Algorithm{sig.MLDSA65, sig.MLDSA65ECDSAP256, sig.MLDSA65RSAPSSSHA256}

// cryptoProfile reports whether a session whose responses signer signs can
// be offered the ACS-Crypto profile. The profile "MUST support at least
// ML-DSA-65" (ACS conformance, ACS-Crypto), and exists for non-repudiation,
// so all three must hold: the session's responses are signed with an
// asymmetric key, the Guardian's response key signs with ML-DSA-65 (alone
// or in a hybrid), and its verification key set holds an ML-DSA-65 key,
// so that it can verify an agent that signs with one. An ECDSA-only
// deployment is asymmetric but does not have what the profile requires.
func (g *Guardian) cryptoProfile(signer sig.Signer) bool {
	if signer == nil || signer.Algorithm().Symmetric() || g.cfg.ResponseKey == nil {
		return false
	}
	if !slices.Contains(mldsa65, g.cfg.ResponseKey.Algorithm()) {
		return false
	}
	for _, a := range g.algs {
		if slices.Contains(mldsa65, sig.Algorithm(a)) {
			return true
		}
	}
	return false
}
