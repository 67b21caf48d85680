// Package indepverify checks the signatures of Guardian responses with code
// that shares nothing with the signer: canonicalization by gowebpki/jcs
// (the signer uses acsledger's own canonicalizer), HKDF and HMAC from the
// standard library, ECDSA from crypto/ecdsa and ML-DSA from circl directly.
// It reads public keys from the .pub.json key file format (docs/signatures.md)
// by itself. It exists for tests: if the signer and this package agree, they
// agree on ACS §10, not merely with themselves.
package indepverify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
	"github.com/gowebpki/jcs"
)

// Signature is the { algorithm, value, key_id } object of ACS §10.
type Signature struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	Value     string `json:"value"`
}

// SignedInput returns the ACS §10 signed input of a response envelope (the
// JCS form of the envelope without result.signature or error.signature) and
// the signature that was removed.
func SignedInput(envelope []byte) ([]byte, Signature, error) {
	dec := json.NewDecoder(bytes.NewReader(envelope))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return nil, Signature{}, fmt.Errorf("envelope: %w", err)
	}
	var member map[string]any
	for _, name := range []string{"result", "error"} {
		if m, ok := top[name].(map[string]any); ok {
			member = m
		}
	}
	if member == nil {
		return nil, Signature{}, errors.New("envelope has no result or error object")
	}
	rawSig, ok := member["signature"]
	if !ok {
		return nil, Signature{}, errors.New("envelope is not signed")
	}
	delete(member, "signature")
	sb, _ := json.Marshal(rawSig)
	var s Signature
	if err := json.Unmarshal(sb, &s); err != nil {
		return nil, Signature{}, fmt.Errorf("signature: %w", err)
	}
	unsigned, err := json.Marshal(top)
	if err != nil {
		return nil, Signature{}, err
	}
	in, err := jcs.Transform(unsigned)
	if err != nil {
		return nil, Signature{}, fmt.Errorf("jcs: %w", err)
	}
	return in, s, nil
}

// VerifyHMAC checks an HMAC-SHA256 response: the key is
// HKDF-SHA256(ikm, salt empty, info session_id, 32 bytes) (RFC 5869).
func VerifyHMAC(envelope []byte, keyID string, ikm []byte, sessionID string) error {
	in, s, err := SignedInput(envelope)
	if err != nil {
		return err
	}
	if s.Algorithm != "HMAC-SHA256" || s.KeyID != keyID {
		return fmt.Errorf("signed with %s/%s, want HMAC-SHA256/%s", s.Algorithm, s.KeyID, keyID)
	}
	key, err := hkdf.Key(sha256.New, ikm, nil, sessionID, 32)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(in)
	// Strict: a signature value has one spelling. The lenient decoder
	// ignores the padding bits of the last character, so a changed last
	// character could still decode to the same signature.
	got, err := base64.StdEncoding.Strict().DecodeString(s.Value)
	if err != nil {
		return fmt.Errorf("value: %w", err)
	}
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("HMAC does not verify")
	}
	return nil
}

// PublicKey is a parsed .pub.json file.
type PublicKey struct {
	KeyID     string
	Algorithm string
	ECDSA     *ecdsa.PublicKey
	MLDSA65   *mldsa65.PublicKey
}

// ParsePublicKey reads a .pub.json document of an ECDSA-P256, ML-DSA-65 or
// ML-DSA-65+ECDSA-P256 key.
func ParsePublicKey(doc []byte) (*PublicKey, error) {
	var f struct {
		KeyID     string `json:"key_id"`
		Algorithm string `json:"algorithm"`
		Public    string `json:"public"`
	}
	if err := json.Unmarshal(doc, &f); err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(f.Public)
	if err != nil {
		return nil, fmt.Errorf("public: %w", err)
	}
	k := &PublicKey{KeyID: f.KeyID, Algorithm: f.Algorithm}
	switch f.Algorithm {
	case "ECDSA-P256":
		k.ECDSA, err = parseECDSA(raw)
	case "ML-DSA-65":
		k.MLDSA65, err = parseMLDSA65(raw)
	case "ML-DSA-65+ECDSA-P256":
		var pqc, cls []byte
		if pqc, cls, err = split(raw); err == nil {
			if k.MLDSA65, err = parseMLDSA65(pqc); err == nil {
				k.ECDSA, err = parseECDSA(cls)
			}
		}
	default:
		err = fmt.Errorf("algorithm %q is not one this verifier implements", f.Algorithm)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Verify checks an asymmetric response signature with k. For the hybrid
// both components must verify (ACS §10.2).
func Verify(envelope []byte, k *PublicKey) error {
	in, s, err := SignedInput(envelope)
	if err != nil {
		return err
	}
	if s.Algorithm != k.Algorithm || s.KeyID != k.KeyID {
		return fmt.Errorf("signed with %s/%s, want %s/%s", s.Algorithm, s.KeyID, k.Algorithm, k.KeyID)
	}
	val, err := base64.StdEncoding.Strict().DecodeString(s.Value)
	if err != nil {
		return fmt.Errorf("value: %w", err)
	}
	switch k.Algorithm {
	case "ECDSA-P256":
		return verifyECDSA(k.ECDSA, in, val)
	case "ML-DSA-65":
		return verifyMLDSA(k.MLDSA65, in, val)
	case "ML-DSA-65+ECDSA-P256":
		pqc, cls, err := split(val)
		if err != nil {
			return err
		}
		if err := verifyMLDSA(k.MLDSA65, in, pqc); err != nil {
			return fmt.Errorf("hybrid ML-DSA-65 component: %w", err)
		}
		if err := verifyECDSA(k.ECDSA, in, cls); err != nil {
			return fmt.Errorf("hybrid ECDSA-P256 component: %w", err)
		}
		return nil
	}
	return fmt.Errorf("algorithm %q not implemented", k.Algorithm)
}

func verifyECDSA(k *ecdsa.PublicKey, in, val []byte) error {
	h := sha256.Sum256(in)
	if !ecdsa.VerifyASN1(k, h[:], val) {
		return errors.New("ECDSA-P256 signature does not verify")
	}
	return nil
}

func verifyMLDSA(k *mldsa65.PublicKey, in, val []byte) error {
	if !mldsa65.Verify(k, in, nil, val) {
		return errors.New("ML-DSA-65 signature does not verify")
	}
	return nil
}

func parseECDSA(b []byte) (*ecdsa.PublicKey, error) {
	k, err := x509.ParsePKIXPublicKey(b)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("not an ECDSA key: %T", k)
	}
	return ek, nil
}

func parseMLDSA65(b []byte) (*mldsa65.PublicKey, error) {
	var k mldsa65.PublicKey
	if err := k.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return &k, nil
}

// split reads the §10.2 framing: len(a) || a || len(b) || b, each length a
// 4-byte big-endian unsigned integer, nothing after.
func split(v []byte) (a, b []byte, err error) {
	next := func() ([]byte, error) {
		if len(v) < 4 {
			return nil, errors.New("hybrid value: truncated length")
		}
		n := binary.BigEndian.Uint32(v)
		if uint64(len(v)-4) < uint64(n) {
			return nil, errors.New("hybrid value: truncated component")
		}
		c := v[4 : 4+n]
		v = v[4+n:]
		return c, nil
	}
	if a, err = next(); err != nil {
		return nil, nil, err
	}
	if b, err = next(); err != nil {
		return nil, nil, err
	}
	if len(v) != 0 {
		return nil, nil, errors.New("hybrid value: trailing bytes")
	}
	return a, b, nil
}
