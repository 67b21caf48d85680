package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// TokenPrefix starts every token acsledger makes, so that a token pasted
// into the wrong place is recognisable (and secret scanners can find it).
const TokenPrefix = "acsl_"

// tokenRandomBytes is the entropy of a token: 256 bits.
const tokenRandomBytes = 32

// NewToken returns a fresh random token and its SHA-256, the only form in
// which it is stored.
func NewToken() (token string, hash [32]byte) {
	b := make([]byte, tokenRandomBytes)
	rand.Read(b) // crypto/rand.Read never returns an error
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken is the SHA-256 of a token string: what the store keeps and
// what a presented token is looked up by.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// wellFormed reports whether s has the shape of a token NewToken makes.
func wellFormed(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(tokenRandomBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}
