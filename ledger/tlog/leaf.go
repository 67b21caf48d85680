package tlog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxSafeInteger is 2^53-1: JCS (RFC 8785) serializes numbers as IEEE 754
// doubles, so a position above it could not round-trip through a conforming
// JSON parser.
const maxSafeInteger = 1<<53 - 1

// Leaf is what one Merkle leaf commits to: the position of one ContextEntry in
// its session chain and the entry_hash the ledger recomputed for it.
type Leaf struct {
	SessionID string
	Position  int64
	EntryHash [32]byte
}

// MarshalJCS returns the leaf's bytes as hashed into the tree: the RFC 8785
// canonical form of
//
//	{"entry_hash":"<64 lowercase hex>","position":<int>,"session_id":"<text>","v":1}
//
// Members appear in JCS order (sorted by UTF-16 code units), entry_hash is
// lowercase hex like ACS §8.2 hashes, and v names this encoding's version.
func (l Leaf) MarshalJCS() ([]byte, error) {
	if l.SessionID == "" {
		return nil, errors.New("leaf: empty session_id")
	}
	if !utf8.ValidString(l.SessionID) {
		return nil, fmt.Errorf("leaf: session_id %q is not valid UTF-8", l.SessionID)
	}
	if l.Position < 0 || l.Position > maxSafeInteger {
		return nil, fmt.Errorf("leaf: position %d outside 0..2^53-1", l.Position)
	}
	b := make([]byte, 0, 128+len(l.SessionID))
	b = append(b, `{"entry_hash":"`...)
	b = hex.AppendEncode(b, l.EntryHash[:])
	b = append(b, `","position":`...)
	b = strconv.AppendInt(b, l.Position, 10)
	b = append(b, `,"session_id":`...)
	b = appendJCSString(b, l.SessionID)
	b = append(b, `,"v":1}`...)
	return b, nil
}

// appendJCSString quotes s as RFC 8785 §3.2.2.2 requires: only '"', '\\' and
// controls below U+0020 are escaped (the five with short forms use them, the
// rest \u00xx in lowercase hex); everything else, U+2028 included, is literal.
func appendJCSString(b []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ParseLeaf decodes leaf bytes produced by [Leaf.MarshalJCS]. It accepts only
// the exact canonical form, so a leaf has one encoding and re-encoding a
// parsed leaf gives back the same bytes.
func ParseLeaf(data []byte) (Leaf, error) {
	var l Leaf
	rest, ok := bytes.CutPrefix(data, []byte(`{"entry_hash":"`))
	if !ok || len(rest) < 64 {
		return l, errors.New("leaf: does not start with the entry_hash member")
	}
	if _, err := hex.Decode(l.EntryHash[:], rest[:64]); err != nil {
		return l, fmt.Errorf("leaf: entry_hash: %w", err)
	}
	rest, ok = bytes.CutPrefix(rest[64:], []byte(`","position":`))
	if !ok {
		return l, errors.New("leaf: entry_hash is not 64 hex digits followed by position")
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return l, errors.New("leaf: position not followed by session_id")
	}
	pos, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return l, fmt.Errorf("leaf: position: %w", err)
	}
	l.Position = pos
	rest, ok = bytes.CutPrefix(rest[end:], []byte(`,"session_id":"`))
	if !ok {
		return l, errors.New("leaf: missing session_id member")
	}
	body, ok := bytes.CutSuffix(rest, []byte(`","v":1}`))
	if !ok {
		return l, errors.New(`leaf: does not end with "v":1`)
	}
	sid, err := unquoteJCS(body)
	if err != nil {
		return l, fmt.Errorf("leaf: session_id: %w", err)
	}
	l.SessionID = sid
	canon, err := l.MarshalJCS()
	if err != nil {
		return l, err
	}
	if !bytes.Equal(canon, data) {
		return l, errors.New("leaf: not in canonical JCS form")
	}
	return l, nil
}

// unquoteJCS reverses appendJCSString for the body of a string literal.
func unquoteJCS(b []byte) (string, error) {
	s, err := strconv.Unquote(`"` + string(b) + `"`)
	if err != nil {
		return "", errors.New("malformed string")
	}
	return s, nil
}
