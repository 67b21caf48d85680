package acs

import (
	"errors"
	"strconv"
)

// Classes of JSON input the canonicalizer refuses. A *JSONError wraps
// exactly one of them, so callers can tell them apart with errors.Is.
var (
	// ErrMalformed is any violation of the RFC 8259 grammar: a missing
	// bracket, a bad escape, an unterminated string, a raw control
	// character, a number such as 01 or 1., and so on.
	ErrMalformed = errors.New("malformed JSON")
	// ErrTrailingData means the input continues after its one value.
	ErrTrailingData = errors.New("trailing data after JSON value")
	// ErrDuplicateMember means an object names one member twice, compared
	// after unescaping (RFC 8785 §3.1 requires I-JSON, RFC 7493 §2.3).
	ErrDuplicateMember = errors.New("duplicate object member")
	// ErrInvalidUTF8 means the input is not valid UTF-8 (RFC 8785 §3.2.4).
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLoneSurrogate means a \u escape encodes half of a UTF-16
	// surrogate pair without the other half (RFC 7493 §2.1).
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate")
	// ErrNumberRange means a number's magnitude exceeds the largest IEEE 754
	// double (RFC 8785 §3.2.2.3). It is refused, never rounded to infinity.
	ErrNumberRange = errors.New("number outside IEEE 754 double range")
	// ErrTooDeep means arrays and objects nest deeper than MaxDepth.
	ErrTooDeep = errors.New("JSON nested too deeply")
	// ErrTooLarge means the input is longer than MaxInput.
	ErrTooLarge = errors.New("JSON input too large")
)

// MaxDepth is the deepest nesting of arrays and objects the canonicalizer
// accepts. Real ContextEntries and request params nest a few levels; the
// limit bounds recursion and the cost of reordering members, which can copy
// an object's bytes once per enclosing object.
const MaxDepth = 256

// MaxInput is the longest input the canonicalizer accepts, 256 MiB. It
// keeps every offset into the output (at most 5.25 times longer: 1e20
// becomes 21 digits) within 32 bits. Requests and entries are capped far
// lower where they enter.
const MaxInput = 256 << 20

// JSONError reports input the canonicalizer refuses: what is wrong and the
// byte offset (0-based, into the input) where it starts.
type JSONError struct {
	// Offset is the 0-based byte offset of the problem in the input.
	Offset int
	// Kind is one of the Err* classes above; Unwrap returns it.
	Kind error
	// Detail says what exactly is wrong, naming the member where relevant.
	Detail string
}

func (e *JSONError) Error() string {
	return e.Detail + " at byte " + strconv.Itoa(e.Offset)
}

func (e *JSONError) Unwrap() error { return e.Kind }

// quoteName renders a member name or other input fragment for an error
// message: quoted, so control characters cannot reach a log raw, and cut
// short, so one request cannot write a megabyte into one.
func quoteName(b []byte) string {
	const max = 64
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}
