package sig

import "fmt"

// Algorithm is a name from the ACS §10.1 algorithm registry, spelled exactly
// as the registry and the request-envelope schema spell it.
type Algorithm string

// The ACS §10.1 registry.
const (
	HMACSHA256          Algorithm = "HMAC-SHA256"
	ECDSAP256           Algorithm = "ECDSA-P256"
	RSAPSSSHA256        Algorithm = "RSA-PSS-SHA256"
	MLDSA65             Algorithm = "ML-DSA-65"
	MLDSA44             Algorithm = "ML-DSA-44"
	MLDSA87             Algorithm = "ML-DSA-87"
	SLHDSA128s          Algorithm = "SLH-DSA-128s"
	SLHDSA128f          Algorithm = "SLH-DSA-128f"
	MLDSA65ECDSAP256    Algorithm = "ML-DSA-65+ECDSA-P256"
	MLDSA65RSAPSSSHA256 Algorithm = "ML-DSA-65+RSA-PSS-SHA256"
)

// Algorithms returns the registry in the order of ACS §10.1.
func Algorithms() []Algorithm {
	return []Algorithm{
		HMACSHA256, ECDSAP256, RSAPSSSHA256,
		MLDSA65, MLDSA44, MLDSA87,
		SLHDSA128s, SLHDSA128f,
		MLDSA65ECDSAP256, MLDSA65RSAPSSSHA256,
	}
}

// ParseAlgorithm returns the registered algorithm named s. Names are
// compared exactly: "hmac-sha256" is not a registered name.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range Algorithms() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("algorithm %q is not in the ACS §10.1 registry", s)
}

// Symmetric reports whether a is a MAC whose verifying key is the signing
// key (only HMAC-SHA256).
func (a Algorithm) Symmetric() bool { return a == HMACSHA256 }

// Hybrid reports whether a is a <PQC>+<CLASSICAL> composite (ACS §10.2).
func (a Algorithm) Hybrid() bool { return a == MLDSA65ECDSAP256 || a == MLDSA65RSAPSSSHA256 }
