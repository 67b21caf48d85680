package trace

import (
	"strconv"
	"unicode/utf8"
)

// buf writes one JSON object by hand: the encodings run once per exported
// entry, and building maps for encoding/json would cost several times the
// hashing the ledger did to store the entry. Members are written in a
// fixed order, so an event is the same bytes every time it is encoded.
type buf struct {
	b     []byte
	first bool // no member written yet in the current object
}

func newBuf(n int) *buf { return &buf{b: make([]byte, 0, n)} }

func (b *buf) open() *buf {
	b.b = append(b.b, '{')
	b.first = true
	return b
}

func (b *buf) close() *buf {
	b.b = append(b.b, '}')
	b.first = false
	return b
}

func (b *buf) key(k string) *buf {
	if !b.first {
		b.b = append(b.b, ',')
	}
	b.first = false
	b.b = appendString(b.b, k)
	b.b = append(b.b, ':')
	return b
}

// obj opens an object as the value of member k.
func (b *buf) obj(k string) *buf { return b.key(k).open() }

func (b *buf) str(s string) *buf {
	b.b = appendString(b.b, s)
	b.first = false
	return b
}

func (b *buf) int(n int64) *buf {
	b.b = strconv.AppendInt(b.b, n, 10)
	b.first = false
	return b
}

func (b *buf) uint(n uint64) *buf {
	b.b = strconv.AppendUint(b.b, n, 10)
	b.first = false
	return b
}

func (b *buf) bool(v bool) *buf {
	b.b = strconv.AppendBool(b.b, v)
	b.first = false
	return b
}

// raw writes v, which must be one valid compact JSON value.
func (b *buf) raw(v []byte) *buf {
	b.b = append(b.b, v...)
	b.first = false
	return b
}

// strIf writes member k only when s is not empty.
func (b *buf) strIf(k, s string) *buf {
	if s != "" {
		b.key(k).str(s)
	}
	return b
}

// rawIf writes member k only when v is a value other than null.
func (b *buf) rawIf(k string, v []byte) *buf {
	if len(v) > 0 && string(v) != "null" {
		b.key(k).raw(v)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it; the strings come from parsed JSON, so there is
// none in practice.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript readers of
		// the stream; escape them as encoding/json does.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
