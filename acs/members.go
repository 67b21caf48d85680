package acs

import "bytes"

// The one JSON member scanner of the tree. CanonicalMember,
// CanonicalMemberSpan, CanonicalMembers and CanonicalElements read values
// out of JSON in RFC 8785 form, the output of [Canonicalize] or an
// [Entry]'s Content, without decoding it: the Guardian cuts a request's
// params out of its canonical body with them, acs/sig splits the signature
// out of an envelope, and the verifier reads entries and responses. Such
// input was parsed strictly: a member name has one spelling, there is no
// whitespace, and a value ends at its closing quote or bracket or, for a
// number or literal, at the next ',', ']', '}' or ':'. They never fail on
// such input. On anything else they stop at the first byte that is not
// where canonical JSON would have it and report the value absent, rather
// than guess: a value position that holds no value (`{"a":}`,
// `{"a":,"b":1}`) is malformed, not an empty value.
//
// JSONMembers is the same walk over any JSON text a strict parser has
// accepted, whitespace and all (ingest reads OPA events with it), and a
// ValueScanner finds where a value ends in input that arrives a piece at a
// time (the verifier's streaming bundle reader).

// CanonicalMember returns the value of the top-level member name of obj, a
// canonical object, or nil when obj is not one or has no such member before
// the first malformed byte.
func CanonicalMember(obj []byte, name string) []byte {
	_, vs, end, ok := CanonicalMemberSpan(obj, name)
	if !ok {
		return nil
	}
	return obj[vs:end]
}

// CanonicalMemberSpan is CanonicalMember with the member's place in obj:
// its name's opening quote is obj[start] and its value obj[valStart:end].
// Code that cuts a member out of canonical bytes, or splices one in, needs
// the place; in RFC 8785 form the member before it, if any, ends with the
// ',' at obj[start-1].
func CanonicalMemberSpan(obj []byte, name string) (start, valStart, end int, ok bool) {
	m := scanMembers(obj, false)
	for {
		at, key, v, e, more := m.next()
		if !more {
			return 0, 0, 0, false
		}
		// A member name in RFC 8785 form has one spelling, so comparing
		// the bytes between the quotes compares names that need no
		// escape, which every name acsledger looks up is.
		if string(key) == name {
			return at, e - len(v), e, true
		}
	}
}

// CanonicalMembers calls f with each top-level member of obj, a canonical
// object: its name as written between the quotes, and its value, until f
// returns false. It reports whether obj is an object, well formed up to
// where f stopped (or to its end).
func CanonicalMembers(obj []byte, f func(name, value []byte) bool) bool {
	return eachMember(scanMembers(obj, false), f)
}

// JSONMembers is CanonicalMembers for a JSON text that a strict parser has
// accepted but that is not in canonical form: whitespace may surround
// every token. A name is still passed as written between its quotes,
// escapes and all.
func JSONMembers(obj []byte, f func(name, value []byte) bool) bool {
	return eachMember(scanMembers(obj, true), f)
}

func eachMember(m memberScan, f func(name, value []byte) bool) bool {
	for {
		_, name, v, _, more := m.next()
		if !more {
			return m.state == wellFormed
		}
		if !f(name, v) {
			return true
		}
	}
}

// CanonicalElements calls f with each element of arr, a canonical array. It
// reports whether arr is a well-formed array; f may have been called for
// the elements before the first malformed byte.
func CanonicalElements(arr []byte, f func(elem []byte)) bool {
	if len(arr) < 2 || arr[0] != '[' {
		return false
	}
	if arr[1] == ']' {
		return len(arr) == 2
	}
	for i := 1; ; {
		end := skipValue(arr, i)
		if end < 0 || end >= len(arr) {
			return false
		}
		f(arr[i:end])
		switch arr[end] {
		case ',':
			i = end + 1
		case ']':
			return end == len(arr)-1
		default:
			return false
		}
	}
}

// A memberScan reads the top-level members of an object one at a time.
type memberScan struct {
	obj []byte
	// i is where the next member's name starts while state is reading.
	i int
	// ws allows JSON whitespace around every token; without it obj must
	// be canonical.
	ws    bool
	state int8
}

// The states of a memberScan.
const (
	reading int8 = iota
	wellFormed
	malformed
)

func scanMembers(obj []byte, ws bool) memberScan {
	m := memberScan{obj: obj, ws: ws, state: malformed}
	i := space(obj, 0, ws)
	if i >= len(obj) || obj[i] != '{' {
		return m
	}
	if m.i = space(obj, i+1, ws); m.i < len(obj) && obj[m.i] == '}' {
		m.end(m.i)
		return m
	}
	m.state = reading
	return m
}

// next returns the next member: where its name's opening quote is, its
// name between the quotes, its value, and the index just past the value.
// more is false at the end of the object or at the first malformed byte;
// state then says which. A member is returned even when the byte after it
// is malformed; the call after it reports that.
func (m *memberScan) next() (at int, name, value []byte, end int, more bool) {
	obj, i := m.obj, m.i
	if m.state != reading {
		return
	}
	if i >= len(obj) || obj[i] != '"' {
		m.state = malformed
		return
	}
	keyEnd := skipValue(obj, i)
	colon := space(obj, keyEnd, m.ws)
	if keyEnd < 0 || colon >= len(obj) || obj[colon] != ':' {
		m.state = malformed
		return
	}
	vs := space(obj, colon+1, m.ws)
	if end = skipValue(obj, vs); end < 0 {
		m.state = malformed
		return
	}
	switch j := space(obj, end, m.ws); {
	case j >= len(obj):
		m.state = malformed
	case obj[j] == ',':
		m.i = space(obj, j+1, m.ws)
	case obj[j] == '}':
		m.end(j)
	default:
		m.state = malformed
	}
	return i, obj[i+1 : keyEnd-1], obj[vs:end], end, true
}

// end records the object's closing brace at obj[j]: nothing but
// whitespace (when allowed) may follow it.
func (m *memberScan) end(j int) {
	m.state = malformed
	if space(m.obj, j+1, m.ws) == len(m.obj) {
		m.state = wellFormed
	}
}

// space returns the index of the first byte at or after i that is not
// JSON whitespace, or i itself when ws is false (canonical input has none).
func space(b []byte, i int, ws bool) int {
	for ws && i >= 0 && i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipValue returns the index just past the value starting at b[i], or -1
// when no value starts there or it does not end within b. A closing
// bracket, ',' or ':' where a value should start is no value.
func skipValue(b []byte, i int) int {
	if i < 0 || i >= len(b) {
		return -1
	}
	if b[i] == '"' {
		// Most values skipped, and every member name, are strings: find
		// the closing quote without a scanner's state.
		if q := closingQuote(b, i+1); q >= 0 {
			return q + 1
		}
		return -1
	}
	var s ValueScanner
	end := s.End(b[i:], 0)
	if end < 0 {
		return -1
	}
	return i + end
}

// A ValueScanner finds where one JSON value ends, in input that may arrive
// a piece at a time. It counts brackets outside strings and finds a
// string's closing quote; it checks nothing else, so what it delimits
// must go to a strict parser (or have come from one). The zero value is
// ready to scan a value.
type ValueScanner struct {
	depth    int
	begun    bool
	inString bool
	// scalar is a number or a literal (true, false, null): it ends at
	// the next delimiter or whitespace, not at a bracket of its own.
	scalar bool
}

// End returns the index in b just past the value that starts at b[0],
// reading from b[from]: the bytes before from were read by an earlier call
// on a shorter b holding the same bytes. It returns -1 when b ends before
// the value does (a number or literal at the very end of b is not known to
// have ended: the caller knows whether input follows), and -2 when b[0]
// starts no value (a closing bracket, ',' or ':').
func (s *ValueScanner) End(b []byte, from int) int {
	if !s.begun {
		if len(b) == 0 {
			return -1
		}
		switch b[0] {
		case '}', ']', ',', ':':
			return -2
		case '"':
			s.inString = true
		case '{', '[':
			s.depth = 1
		default:
			s.scalar = true
		}
		s.begun, from = true, 1
	}
	if s.scalar {
		for j := from; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
				return j
			}
		}
		return -1
	}
	// The state lives in locals while the loop runs, and goes back to s
	// only when b ends before the value does.
	depth, j := s.depth, from
	if s.inString {
		q := closingQuote(b, j)
		if q < 0 {
			return -1
		}
		s.inString = false
		if depth == 0 {
			return q + 1
		}
		j = q + 1
	}
	for ; j < len(b); j++ {
		switch b[j] {
		case '"':
			q := closingQuote(b, j+1)
			if q < 0 {
				s.depth, s.inString = depth, true
				return -1
			}
			j = q
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				s.depth = 0
				return j + 1
			}
		}
	}
	s.depth = depth
	return -1
}

// closingQuote returns the index of the first unescaped '"' in b at or
// after i, inside a string whose opening quote is in b before i, or -1. A
// quote is escaped when an odd number of backslashes runs up to it; the run
// cannot reach past the opening quote, and it may reach back into bytes an
// earlier call read, which is what lets a ValueScanner resume inside a
// string.
func closingQuote(b []byte, i int) int {
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return -1
		}
		q := i + k
		backslashes := 0
		for p := q - 1; b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		i = q + 1
	}
}
