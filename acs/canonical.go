package acs

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Canonicalize parses in strictly and returns its RFC 8785 canonical form.
//
// Beyond the RFC 8259 grammar it refuses, with a *JSONError naming the byte
// offset, everything RFC 8785 §3.1 (via I-JSON) says has no canonical form:
// duplicate members (compared after unescaping), invalid UTF-8, lone
// surrogates in \u escapes, numbers beyond the IEEE 754 double range (1e400
// is refused, never rounded to infinity), trailing data after the value, and
// nesting deeper than MaxDepth; it also refuses input longer than MaxInput.
// Numbers that underflow (1e-400) read as zero, as an IEEE 754 parser reads
// them.
func Canonicalize(in []byte) ([]byte, error) {
	e := newEncoder(in)
	defer e.release()
	if err := e.run(); err != nil {
		return nil, err
	}
	return bytes.Clone(e.out), nil
}

// encoder is the working memory of one canonicalization. It parses and
// serializes in the same pass: every value is written to out as soon as it
// is read, and an object whose members arrived out of order is put in order
// when it closes, by moving its already-canonical members. Encoders are
// pooled so a stream of ContextEntries reuses one set of buffers.
type encoder struct {
	in  []byte
	out []byte

	// members is a stack of the members of every open object; an object
	// owns members[base:] while it is open.
	members []member
	// names holds decoded member names that could not be read from out:
	// names written with escapes, and names of dropped members.
	names []byte
	// scratch holds an object's members while they are rewritten in order,
	// and items the order to write them in.
	scratch []byte
	items   []sortItem
	// escaped reports whether the last string read had an escape.
	escaped bool

	depth int
	// entry, when set, receives the top-level members ParseEntry needs and
	// makes the top-level object drop entry_hash and previous_hash.
	entry  *entryFields
	fields entryFields
}

// member is one object member already written to out.
//
// It holds offsets, not slices, so the pooled stack of members holds no
// pointers: the garbage collector never scans it and writing it needs no
// write barrier.
type member struct {
	nameOff      int32 // input offset of the name's opening quote, for errors
	name0, name1 int32 // decoded name: out[name0:name1], or names[...] if inNames
	start, end   int32 // `"name":value` in out
	inNames      bool
	dropped      bool
	// key is the first eight bytes of the name, big-endian, zero padded;
	// compareMembers uses it to settle most comparisons without the name.
	key uint64
}

// nameKey computes member.key. Names with a byte of 0xEE or more in their
// first eight bytes get no key (0): UTF-16 order differs from byte order
// there, so they are always compared in full.
func nameKey(name []byte) uint64 {
	var k uint64
	if len(name) >= 8 {
		k = binary.BigEndian.Uint64(name)
	} else {
		var b [8]byte
		copy(b[:], name)
		k = binary.BigEndian.Uint64(b[:])
	}
	if k&0x8080808080808080 != 0 {
		for x := k; x != 0; x >>= 8 {
			if byte(x) >= 0xEE {
				return 0
			}
		}
	}
	return k
}

// sortItem is what reorder sorts: a member's key beside its index, so most
// comparisons touch neither the member nor its name.
type sortItem struct {
	key uint64
	idx int32
}

// compareMembers orders two members by name (RFC 8785 §3.2.3).
func (e *encoder) compareMembers(out []byte, a, b *member) int {
	if a.key != b.key && a.key != 0 && b.key != 0 {
		if a.key < b.key {
			return -1
		}
		return 1
	}
	return compareNames(e.name(out, a), e.name(out, b))
}

func (e *encoder) name(out []byte, m *member) []byte {
	if m.inNames {
		return e.names[m.name0:m.name1]
	}
	return out[m.name0:m.name1]
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

func newEncoder(in []byte) *encoder {
	e := encoders.Get().(*encoder)
	e.in = in
	e.out = e.out[:0]
	e.members = e.members[:0]
	e.names = e.names[:0]
	e.depth = 0
	return e
}

func (e *encoder) release() {
	// Keep the buffers a typical entry needs; let a rare huge document's
	// buffers go rather than pin them in the pool.
	const keep = 1 << 20
	if cap(e.out) > keep || cap(e.scratch) > keep {
		return
	}
	e.in, e.entry = nil, nil
	encoders.Put(e)
}

// run canonicalizes all of e.in into e.out.
func (e *encoder) run() error {
	if len(e.in) > MaxInput {
		return e.fail(MaxInput, ErrTooLarge, "input of "+strconv.Itoa(len(e.in))+" bytes is longer than "+strconv.Itoa(MaxInput))
	}
	out, i, err := e.value(e.out[:0], 0)
	e.out = out
	if err != nil {
		return err
	}
	if i = skipSpace(e.in, i); i < len(e.in) {
		return e.fail(i, ErrTrailingData, describeByte(e.in[i])+" after the JSON value")
	}
	return nil
}

func (e *encoder) fail(off int, kind error, detail string) error {
	return &JSONError{Offset: off, Kind: kind, Detail: detail}
}

func skipSpace(in []byte, i int) int {
	for i < len(in) {
		// Whitespace is at most ' ', so one comparison settles most bytes.
		if c := in[i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
		i++
	}
	return i
}

// value canonicalizes the value starting at or after in[i] (after
// whitespace) and returns the offset just past it.
func (e *encoder) value(out []byte, i int) ([]byte, int, error) {
	in := e.in
	i = skipSpace(in, i)
	if i >= len(in) {
		return out, i, e.fail(i, ErrMalformed, "unexpected end of input, expected a value")
	}
	switch c := in[i]; c {
	case '{':
		return e.object(out, i)
	case '[':
		return e.array(out, i)
	case '"':
		return e.str(out, i)
	case 't':
		return e.literal(out, i, "true")
	case 'f':
		return e.literal(out, i, "false")
	case 'n':
		return e.literal(out, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return e.number(out, i)
		}
		return out, i, e.fail(i, ErrMalformed, describeByte(c)+", expected a value")
	}
}

func (e *encoder) literal(out []byte, i int, lit string) ([]byte, int, error) {
	if !bytes.HasPrefix(e.in[i:], []byte(lit)) {
		return out, i, e.fail(i, ErrMalformed, "invalid literal, expected "+lit)
	}
	out = append(out, lit...)
	return out, i + len(lit), nil
}

// describeByte names an unexpected byte for an error message.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "unexpected character " + strconv.QuoteRune(rune(c))
	}
	return "unexpected byte 0x" + strconv.FormatUint(uint64(c), 16)
}

func (e *encoder) enter(i int) error {
	e.depth++
	if e.depth > MaxDepth {
		return e.fail(i, ErrTooDeep, "arrays and objects nested deeper than "+strconv.Itoa(MaxDepth))
	}
	return nil
}

func (e *encoder) array(out []byte, open int) ([]byte, int, error) {
	if err := e.enter(open); err != nil {
		return out, open, err
	}
	out = append(out, '[')
	i := skipSpace(e.in, open+1)
	if i < len(e.in) && e.in[i] == ']' {
		out = append(out, ']')
		e.depth--
		return out, i + 1, nil
	}
	for {
		var err error
		if out, i, err = e.value(out, i); err != nil {
			return out, i, err
		}
		i = skipSpace(e.in, i)
		if i >= len(e.in) {
			return out, i, e.fail(i, ErrMalformed, "unexpected end of input in array opened at byte "+strconv.Itoa(open))
		}
		switch e.in[i] {
		case ',':
			out = append(out, ',')
			i++
			continue
		case ']':
			out = append(out, ']')
			e.depth--
			return out, i + 1, nil
		}
		return out, i, e.fail(i, ErrMalformed, describeByte(e.in[i])+", expected ',' or ']' after array element")
	}
}

func (e *encoder) object(out []byte, open int) ([]byte, int, error) {
	if err := e.enter(open); err != nil {
		return out, open, err
	}
	in := e.in
	top := e.entry != nil && e.depth == 1
	out = append(out, '{')
	base, namesBase, region := len(e.members), len(e.names), int32(len(out))
	sorted, emitted := true, 0
	i := skipSpace(in, open+1)
	if i < len(in) && in[i] == '}' {
		out = append(out, '}')
		e.depth--
		return out, i + 1, nil
	}
	for {
		if i >= len(in) {
			return out, i, e.fail(i, ErrMalformed, "unexpected end of input in object opened at byte "+strconv.Itoa(open))
		}
		if in[i] != '"' {
			return out, i, e.fail(i, ErrMalformed, describeByte(in[i])+", expected a member name in double quotes")
		}
		mark := len(out)
		if emitted > 0 {
			out = append(out, ',')
		}
		m := member{nameOff: int32(i), start: int32(len(out))}
		var err error
		if out, i, err = e.str(out, i); err != nil {
			return out, i, err
		}
		// The name as written to out is also its decoded form unless the
		// canonical form escapes something. Its place in out stays put: out
		// only grows past it, and later rewrites touch only later bytes.
		m.name0, m.name1 = m.start+1, int32(len(out)-1)
		if e.escaped {
			// Member order and duplicates are decided on the unescaped
			// name (RFC 8785 §3.2.3).
			n := len(e.names)
			e.names = appendUnescaped(e.names, out[m.name0:m.name1])
			m.name0, m.name1, m.inNames = int32(n), int32(len(e.names)), true
		}
		name := e.name(out, &m)
		m.key = nameKey(name)

		if len(e.members) > base {
			switch c := e.compareMembers(out, &e.members[len(e.members)-1], &m); {
			case c == 0:
				return out, i, e.fail(int(m.nameOff), ErrDuplicateMember, "duplicate member "+quoteName(name))
			case c > 0:
				sorted = false
			}
		}

		f := fieldNone
		if top {
			f = lookupField(name)
		}

		if i = skipSpace(in, i); i >= len(in) || in[i] != ':' {
			if i >= len(in) {
				return out, i, e.fail(i, ErrMalformed, "unexpected end of input, expected ':' after member name")
			}
			return out, i, e.fail(i, ErrMalformed, describeByte(in[i])+", expected ':' after member name "+quoteName(name))
		}
		out = append(out, ':')
		valueStart := len(out)
		if out, i, err = e.value(out, i+1); err != nil {
			return out, i, err
		}

		if f != fieldNone {
			e.entry.capture(f, int(m.nameOff), out[valueStart:])
			// ACS §8.2: content_bytes is the entry with its top-level
			// entry_hash and previous_hash removed; nested members of the
			// same name are content like any other.
			if f == fieldEntryHash || f == fieldPreviousHash {
				// Its name in out is about to be overwritten.
				n := len(e.names)
				e.names = append(e.names, fieldNames[f]...)
				m.name0, m.name1, m.inNames = int32(n), int32(len(e.names)), true
				m.dropped = true
				out = out[:mark]
			}
		}
		if !m.dropped {
			m.end = int32(len(out))
			emitted++
		}
		e.members = append(e.members, m)

		i = skipSpace(in, i)
		if i >= len(in) {
			return out, i, e.fail(i, ErrMalformed, "unexpected end of input in object opened at byte "+strconv.Itoa(open))
		}
		if in[i] == ',' {
			i = skipSpace(in, i+1)
			continue
		}
		if in[i] == '}' {
			i++
			break
		}
		return out, i, e.fail(i, ErrMalformed, describeByte(in[i])+", expected ',' or '}' after object member")
	}
	if !sorted {
		var err error
		if out, err = e.reorder(out, base, region); err != nil {
			return out, i, err
		}
	}
	out = append(out, '}')
	e.members = e.members[:base]
	e.names = e.names[:namesBase]
	e.depth--
	return out, i, nil
}

// reorder sorts the members of the object whose members start at
// e.members[base] and whose serialized members start at out[region],
// checks them for duplicates, and rewrites them in order.
func (e *encoder) reorder(out []byte, base int, region int32) ([]byte, error) {
	ms := e.members[base:]
	// Sort a small slice of keys and indexes rather than the members.
	items := e.items[:0]
	for j := range ms {
		items = append(items, sortItem{ms[j].key, int32(j)})
	}
	e.items = items
	less := func(a, b sortItem) int {
		if a.key != b.key && a.key != 0 && b.key != 0 {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return compareNames(e.name(out, &ms[a.idx]), e.name(out, &ms[b.idx]))
	}
	if len(items) <= 16 {
		for j := 1; j < len(items); j++ {
			cur := items[j]
			k := j
			for ; k > 0 && less(items[k-1], cur) > 0; k-- {
				items[k] = items[k-1]
			}
			items[k] = cur
		}
	} else {
		slices.SortFunc(items, less)
	}
	dup := -1
	for j := 1; j < len(items); j++ {
		if x, y := items[j-1].key, items[j].key; x != y && x != 0 && y != 0 {
			continue
		}
		a, b := &ms[items[j-1].idx], &ms[items[j].idx]
		if !bytes.Equal(e.name(out, a), e.name(out, b)) {
			continue
		}
		// Report the later of the two, where the repetition is.
		k := int(max(a.nameOff, b.nameOff))
		if dup < 0 || k < dup {
			dup = k
		}
	}
	if dup >= 0 {
		for j := range ms {
			if int(ms[j].nameOff) == dup {
				return out, e.fail(dup, ErrDuplicateMember, "duplicate member "+quoteName(e.name(out, &ms[j])))
			}
		}
	}
	e.scratch = append(e.scratch[:0], out[region:]...)
	out = out[:region]
	n := 0
	for _, it := range items {
		m := &ms[it.idx]
		if m.dropped {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, e.scratch[m.start-region:m.end-region]...)
		n++
	}
	return out, nil
}

// compareNames orders member names as RFC 8785 §3.2.3 requires: by their
// UTF-16 code units, compared as unsigned integers. Comparing UTF-8 bytes
// gives code point order, which agrees with UTF-16 order except between a
// character at or above U+10000 (a surrogate pair, 0xD800-0xDBFF first) and
// one in U+E000-U+FFFF: UTF-16 puts the former first, UTF-8 the latter. At
// the first differing byte both names are at the same character boundary
// (their prefixes are equal), so the lead bytes tell the two cases apart.
func compareNames(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for ; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		switch {
		case x >= 0xF0 && (y == 0xEE || y == 0xEF):
			return -1
		case y >= 0xF0 && (x == 0xEE || x == 0xEF):
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	return len(a) - len(b)
}

// plain marks the bytes a string copies through without looking twice:
// printable ASCII other than '"' and '\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain returns the offset of the first byte at or after in[i] that is
// not plain, looking at eight bytes at a time.
func skipPlain(in []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(in) {
		w := binary.LittleEndian.Uint64(in[i:])
		// A byte gets its high bit set if it is below 0x20 (the borrow
		// of w-0x20), '"' or '\\' (x^c is 0, minus 1) or non-ASCII (its
		// own high bit). A borrow only carries into later bytes, so the
		// first flagged byte is a true one.
		t := (w - ones*0x20) | ((w ^ ones*'"') - ones) | ((w ^ ones*'\\') - ones) | w
		if t &= highs; t != 0 {
			return i + bits.TrailingZeros64(t)/8
		}
		i += 8
	}
	for i < len(in) && plain[in[i]] {
		i++
	}
	return i
}

// str canonicalizes the string whose opening quote is at in[open]
// (RFC 8785 §3.2.2.2): the escapes \" \\ \b \f \n \r \t stay, other control
// characters become \u00xx in lowercase hex, and every other character,
// escaped in the input or not, is written as literal UTF-8.
func (e *encoder) str(out []byte, open int) ([]byte, int, error) {
	in := e.in
	out = append(out, '"')
	i := open + 1
	run := i
	e.escaped = false
	for {
		i = skipPlain(in, i)
		if i >= len(in) {
			return out, i, e.fail(open, ErrMalformed, "unterminated string")
		}
		c := in[i]
		switch {
		case c == '"':
			out = append(out, in[run:i]...)
			return append(out, '"'), i + 1, nil
		case c >= 0x80:
			// RFC 8785 §3.2.4: the result must be valid UTF-8, so the input
			// must be. utf8.DecodeRune also refuses encoded surrogates and
			// overlong forms.
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				return out, i, e.fail(i, ErrInvalidUTF8, "invalid UTF-8 byte 0x"+strconv.FormatUint(uint64(c), 16)+" in string")
			}
			i += size
			continue
		case c < 0x20:
			return out, i, e.fail(i, ErrMalformed, "control character 0x"+strconv.FormatUint(uint64(c), 16)+" in string must be escaped")
		}
		// c == '\\'
		e.escaped = true
		out = append(out, in[run:i]...)
		if i+1 >= len(in) {
			return out, i, e.fail(open, ErrMalformed, "unterminated string")
		}
		switch esc := in[i+1]; esc {
		case '"', '\\', 'b', 'f', 'n', 'r', 't':
			out = append(out, '\\', esc)
			i += 2
		case '/':
			out = append(out, '/')
			i += 2
		case 'u':
			r, ok := hex4(in, i+2)
			if !ok {
				return out, i, e.fail(i, ErrMalformed, "invalid \\u escape, want four hex digits")
			}
			at := i
			i += 6
			switch {
			case 0xD800 <= r && r < 0xDC00:
				lo, ok := rune(0), false
				if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
					lo, ok = hex4(in, i+2)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return out, at, e.fail(at, ErrLoneSurrogate, "high surrogate "+string(in[at:at+6])+" not followed by a low surrogate escape")
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			case 0xDC00 <= r && r <= 0xDFFF:
				return out, at, e.fail(at, ErrLoneSurrogate, "low surrogate "+string(in[at:at+6])+" without a high surrogate before it")
			}
			out = appendCanonicalRune(out, r)
		default:
			return out, i, e.fail(i, ErrMalformed, "invalid escape "+strconv.Quote(string(in[i:i+2])))
		}
		run = i
	}
}

// hex4 reads the four hex digits of a \u escape at in[i:i+4].
func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const lowerHex = "0123456789abcdef"

// appendCanonicalRune writes r as RFC 8785 §3.2.2.2 wants it inside a string.
func appendCanonicalRune(out []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(out, '\\', byte(r))
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', lowerHex[r>>4], lowerHex[r&0xF])
	}
	return utf8.AppendRune(out, r)
}

// appendUnescaped decodes the inside of a canonical string, which uses only
// the escapes appendCanonicalRune writes.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(s, i+1)
			dst = append(dst, byte(r))
			i += 4
		default: // '"' and '\\'
			dst = append(dst, s[i])
		}
	}
	return dst
}

// number canonicalizes the number starting at in[start] (RFC 8785 §3.2.2.3).
func (e *encoder) number(out []byte, start int) ([]byte, int, error) {
	in := e.in
	i := start
	if in[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i >= len(in) || in[i] < '0' || in[i] > '9':
		return out, i, e.fail(i, ErrMalformed, "invalid number, expected a digit after '-'")
	case in[i] == '0':
		i++
		if i < len(in) && '0' <= in[i] && in[i] <= '9' {
			return out, start, e.fail(start, ErrMalformed, "invalid number, leading zero")
		}
	default:
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
	}
	intDigits := i - intStart
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return out, i, e.fail(i, ErrMalformed, "invalid number, expected a digit after '.'")
		}
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
		fracEnd = i
	}
	exponent := false
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		exponent = true
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return out, i, e.fail(i, ErrMalformed, "invalid number, expected a digit in the exponent")
		}
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
	}
	tok := in[start:i]
	if !exponent && isShortestPlain(in[intStart:intStart+intDigits], in[fracStart:fracEnd]) {
		out = append(out, tok...)
		return out, i, nil
	}
	if !exponent && fracStart == fracEnd && intDigits == 1 && in[intStart] == '0' {
		out = append(out, '0') // -0 and 0
		return out, i, nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		// The grammar is checked above, so only ErrRange is left: the
		// magnitude exceeds the largest double. I-JSON (RFC 7493 §2.2)
		// leaves no canonical form for it; ParseFloat's infinity must not
		// be printed.
		return out, start, e.fail(start, ErrNumberRange, "number "+quoteName(tok)+" is outside the IEEE 754 double range")
	}
	out = appendNumber(out, f)
	return out, i, nil
}

// isShortestPlain reports whether a number written without exponent, with
// integer digits ip and fraction digits fp (after the '.', possibly none),
// is already exactly what appendNumber would print for it, so it can be
// copied without a round trip through float64.
//
// That holds when the value is not zero, has at most 15 significant digits,
// no trailing zero in its fraction, and a magnitude of at least 1e-6 (plain
// notation; 15 digits keep it below 1e21). Any decimal of at most 15
// significant digits survives decimal -> double -> 15 digits unchanged
// (IEEE 754 double precision carries 15.95 decimal digits), so two such
// decimals never share a double: no shorter decimal, nor another of equal
// length, denotes the same double, and ECMAScript's shortest round-trip
// digits are the ones written. The integer part is free of leading zeros by
// the grammar.
func isShortestPlain(ip, fp []byte) bool {
	if len(fp) > 0 && fp[len(fp)-1] == '0' {
		return false
	}
	if len(ip) == 1 && ip[0] == '0' {
		// 0.ddd: leading zeros of the fraction are not significant, and
		// more than five of them put the value below 1e-6.
		z := 0
		for z < len(fp) && fp[z] == '0' {
			z++
		}
		return z < len(fp) && z <= 5 && len(fp)-z <= 15
	}
	return len(ip)+len(fp) <= 15
}

// appendNumber writes a finite double as ECMAScript's Number.prototype.
// toString does (ECMA-262 Number::toString, RFC 8785 §3.2.2.3): the
// shortest digits that read back as the same double, in plain notation for
// magnitudes in [1e-6, 1e21) and as d.ddde±x otherwise, with -0 as 0.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if a := max(f, -f); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go pads the exponent to two digits (1e-07); ECMAScript does not.
	x := n + bytes.IndexByte(dst[n:], 'e')
	if dst[x+2] == '0' {
		dst = append(dst[:x+2], dst[x+3:]...)
	}
	return dst
}
