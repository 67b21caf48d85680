package acs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Hash is a SHA-256 digest as used by ACS chain hashing. Its text form is
// lowercase hex.
type Hash [32]byte

// String returns the lowercase hex form used on the wire.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zero bytes (never a real digest in practice;
// used as "no hash").
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash decodes a 64-character lowercase hex digest. Uppercase hex is
// refused: ACS §8.2 defines the text form as lowercase, and accepting both
// would let two spellings of one head compare unequal elsewhere.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, fmt.Errorf("hash %q: want 64 lowercase hex characters, got %d characters", s, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, fmt.Errorf("hash %q: character %d is not lowercase hex", s, i)
		}
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash %q: %w", s, err)
	}
	return h, nil
}

// EntryHash computes a ContextEntry's entry_hash from its content bytes (the
// JCS form of the entry with entry_hash and previous_hash removed, as
// returned by ParseEntry) and the previous entry's hash.
//
// ACS §8.2: the first entry of a session hashes its content alone (prev is
// nil), not the content followed by 32 zero bytes.
func EntryHash(content []byte, prev *Hash) Hash {
	d := sha256.New()
	d.Write(content)
	if prev != nil {
		d.Write(prev[:])
	}
	var h Hash
	d.Sum(h[:0])
	return h
}
