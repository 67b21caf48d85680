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
func ParseHash(s string) (Hash, error) { return parseHash(s) }

func parseHash[T string | []byte](s T) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, fmt.Errorf("hash %s: want 64 lowercase hex characters, got %d characters", quoteName([]byte(s)), len(s))
	}
	for i := range h {
		hi, lo := hexValue[s[2*i]], hexValue[s[2*i+1]]
		if hi|lo > 0xF {
			bad := 2 * i
			if hi <= 0xF {
				bad++
			}
			return Hash{}, fmt.Errorf("hash %s: character %d is not lowercase hex", quoteName([]byte(s)), bad)
		}
		h[i] = hi<<4 | lo
	}
	return h, nil
}

// hexValue maps lowercase hex digits to their value and everything else,
// uppercase included, to 0xFF.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()

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

// RequestHash computes a request_hash (ACS §8.1): the SHA-256 of the RFC 8785
// form of a request's params exactly as received, its signature member
// included (DESIGN.md, normative choices). params must be a JSON object and
// pass every check of Canonicalize.
func RequestHash(params []byte) (Hash, error) {
	if i := skipSpace(params, 0); i < len(params) && params[i] != '{' {
		if kind := JSONKind(params[i]); kind != "" {
			return Hash{}, fmt.Errorf("request params must be a JSON object, got %s", kind)
		}
	}
	e := newEncoder(params)
	defer e.release()
	if err := e.run(); err != nil {
		return Hash{}, fmt.Errorf("request params: %w", err)
	}
	return sha256.Sum256(e.out), nil
}
