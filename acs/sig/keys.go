package sig

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sort"
)

// Signer signs signed inputs for one key_id with one algorithm. For
// HMAC-SHA256 a Signer is bound to one session (its key is the per-session
// key).
type Signer interface {
	Algorithm() Algorithm
	KeyID() string
	// Sign returns the raw signature value (before base64) over msg.
	Sign(msg []byte) ([]byte, error)
}

// Verifier checks signature values made by one key. Verify returns nil, or
// an error wrapping ErrBadSignature.
type Verifier interface {
	Algorithm() Algorithm
	KeyID() string
	Verify(msg, sig []byte) error
}

// MinHMACKeySize is the shortest HMAC input keying material accepted, in
// bytes.
const MinHMACKeySize = 16

// PrivateKey is a signing key with its key_id. For HMAC-SHA256 it holds the
// input keying material (IKM) that per-session keys are derived from.
type PrivateKey struct {
	keyID string
	alg   Algorithm
	ikm   []byte          // HMAC-SHA256 only
	priv  privateMaterial // every other algorithm
}

// PublicKey is a verifying key with its key_id. For HMAC-SHA256 it holds
// the IKM, which is secret: an HMAC PublicKey is never written to a public
// key file.
type PublicKey struct {
	keyID string
	alg   Algorithm
	ikm   []byte
	pub   publicMaterial
}

// GenerateKey makes a new key for alg from crypto/rand. For HMAC-SHA256 it
// draws a 32-byte IKM.
func GenerateKey(alg Algorithm, keyID string) (*PrivateKey, error) {
	if _, err := ParseAlgorithm(string(alg)); err != nil {
		return nil, err
	}
	if keyID == "" {
		return nil, fmt.Errorf("generate %s key: empty key_id", alg)
	}
	if alg == HMACSHA256 {
		ikm := make([]byte, 32)
		if _, err := rand.Read(ikm); err != nil {
			return nil, err
		}
		return NewHMACKey(keyID, ikm)
	}
	m, err := generate(alg)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", alg, err)
	}
	return &PrivateKey{keyID: keyID, alg: alg, priv: m}, nil
}

// NewHMACKey returns an HMAC-SHA256 key named keyID with the given input
// keying material (at least MinHMACKeySize bytes).
func NewHMACKey(keyID string, ikm []byte) (*PrivateKey, error) {
	if keyID == "" {
		return nil, fmt.Errorf("HMAC-SHA256 key: empty key_id")
	}
	if len(ikm) < MinHMACKeySize {
		return nil, fmt.Errorf("HMAC-SHA256 key %q: %d-byte IKM, want at least %d", keyID, len(ikm), MinHMACKeySize)
	}
	return &PrivateKey{keyID: keyID, alg: HMACSHA256, ikm: bytes.Clone(ikm)}, nil
}

// KeyID returns the key's key_id.
func (k *PrivateKey) KeyID() string { return k.keyID }

// Algorithm returns the key's algorithm.
func (k *PrivateKey) Algorithm() Algorithm { return k.alg }

// Public returns the verifying half of k (for HMAC-SHA256, the same IKM).
func (k *PrivateKey) Public() *PublicKey {
	if k.alg == HMACSHA256 {
		return &PublicKey{keyID: k.keyID, alg: k.alg, ikm: k.ikm}
	}
	return &PublicKey{keyID: k.keyID, alg: k.alg, pub: k.priv.public()}
}

// Signer returns a Signer for k. sessionID is used by HMAC-SHA256 only,
// which derives the per-session key from it and refuses an empty one
// (ErrSessionRequired); other algorithms ignore it.
func (k *PrivateKey) Signer(sessionID string) (Signer, error) {
	if k.alg == HMACSHA256 {
		return sessionHMAC[Signer](k.keyID, k.ikm, sessionID)
	}
	return &asymSigner{keyName{k.keyID, k.alg}, k.priv}, nil
}

// KeyID returns the key's key_id.
func (k *PublicKey) KeyID() string { return k.keyID }

// Algorithm returns the key's algorithm.
func (k *PublicKey) Algorithm() Algorithm { return k.alg }

// Verifier returns a Verifier for k; sessionID as for PrivateKey.Signer.
func (k *PublicKey) Verifier(sessionID string) (Verifier, error) {
	if k.alg == HMACSHA256 {
		return sessionHMAC[Verifier](k.keyID, k.ikm, sessionID)
	}
	return &asymVerifier{keyName{k.keyID, k.alg}, k.pub}, nil
}

// Equal reports whether k and o are the same key under the same key_id.
func (k *PublicKey) Equal(o *PublicKey) bool {
	if k.keyID != o.keyID || k.alg != o.alg {
		return false
	}
	if k.alg == HMACSHA256 {
		return hmac.Equal(k.ikm, o.ikm)
	}
	a, err1 := k.pub.marshal()
	b, err2 := o.pub.marshal()
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// sessionKey derives the HMAC-SHA256 key of one session (DESIGN.md, ACS §10):
// HKDF-SHA256 with the deployment's IKM, an empty salt, info = the UTF-8
// session_id, 32 bytes of output.
// sessionHMAC is the HMAC-SHA256 key of session sessionID under ikm, as
// the Signer or Verifier I that an *hmacKey is.
func sessionHMAC[I any](keyID string, ikm []byte, sessionID string) (I, error) {
	key, err := sessionKey(ikm, sessionID)
	if err != nil {
		var none I
		return none, err
	}
	return any(&hmacKey{keyID: keyID, key: key}).(I), nil
}

func sessionKey(ikm []byte, sessionID string) ([]byte, error) {
	if sessionID == "" {
		return nil, ErrSessionRequired
	}
	return hkdf.Key(sha256.New, ikm, nil, sessionID, 32)
}

// macSHA256 is HMAC-SHA256 (RFC 2104) of msg under key.
func macSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

var (
	_ Signer   = (*hmacKey)(nil)
	_ Verifier = (*hmacKey)(nil)
	_ Signer   = (*asymSigner)(nil)
	_ Verifier = (*asymVerifier)(nil)
)

// hmacKey is both Signer and Verifier for one session's HMAC-SHA256 key.
type hmacKey struct {
	keyID string
	key   []byte
}

func (h *hmacKey) Algorithm() Algorithm            { return HMACSHA256 }
func (h *hmacKey) KeyID() string                   { return h.keyID }
func (h *hmacKey) Sign(msg []byte) ([]byte, error) { return macSHA256(h.key, msg), nil }
func (h *hmacKey) Verify(msg, sig []byte) error {
	if len(sig) != sha256.Size {
		return fmt.Errorf("%w: %d-byte value, HMAC-SHA256 values are 32 bytes", ErrBadSignature, len(sig))
	}
	if !hmac.Equal(macSHA256(h.key, msg), sig) {
		return fmt.Errorf("%w: MAC differs", ErrBadSignature)
	}
	return nil
}

// keyName is what an asymmetric Signer and Verifier say of their key.
type keyName struct {
	keyID string
	alg   Algorithm
}

func (n keyName) Algorithm() Algorithm { return n.alg }
func (n keyName) KeyID() string        { return n.keyID }

type asymSigner struct {
	keyName
	priv privateMaterial
}

func (s *asymSigner) Sign(msg []byte) ([]byte, error) { return s.priv.sign(msg) }

type asymVerifier struct {
	keyName
	pub publicMaterial
}

func (v *asymVerifier) Verify(msg, sig []byte) error {
	if err := v.pub.verify(msg, sig); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	return nil
}

// KeySet maps key_id to verifying keys: what a verifier trusts. The zero
// KeySet is empty and ready to use; a nil *KeySet reads as empty. A KeySet is safe for concurrent reads
// once no more keys are added.
type KeySet struct {
	keys map[string]*PublicKey
}

// NewKeySet returns a key set holding keys; a key_id given twice is an
// error.
func NewKeySet(keys ...*PublicKey) (*KeySet, error) {
	s := &KeySet{}
	for _, k := range keys {
		if err := s.Add(k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds k. Adding a second, different key under a key_id already in the
// set is an error; adding the same key again is not.
func (s *KeySet) Add(k *PublicKey) error {
	if s.keys == nil {
		s.keys = map[string]*PublicKey{}
	}
	if old, ok := s.keys[k.keyID]; ok {
		if old.Equal(k) {
			return nil
		}
		return fmt.Errorf("key set: key_id %q already names a different %s key", k.keyID, old.alg)
	}
	s.keys[k.keyID] = k
	return nil
}

// Get returns the key named keyID.
func (s *KeySet) Get(keyID string) (*PublicKey, bool) {
	if s == nil {
		return nil, false
	}
	k, ok := s.keys[keyID]
	return k, ok
}

// KeyIDs returns the key_ids of the set in sorted order.
func (s *KeySet) KeyIDs() []string {
	if s == nil {
		return nil
	}
	ids := make([]string, 0, len(s.keys))
	for id := range s.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Len returns the number of keys in the set.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}
