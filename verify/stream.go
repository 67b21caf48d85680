package verify

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/acsledger/acsledger/acs"
)

// maxValueBytes bounds one value of a bundle read whole (an entry, a
// response, a step's member, a policy bundle's content), so that a bundle
// cannot make the verifier hold an unbounded value: the canonicalizer
// refuses longer input anyway.
const maxValueBytes = acs.MaxInput

// A valueReader reads a JSON text from a stream a piece at a time: the
// punctuation of the objects and arrays its caller walks, and each value
// inside them whole, as the bytes of the input. It only finds where a value
// ends (strings, and brackets outside strings); it checks nothing else, so
// every value it returns must go to a strict parser (acs.ParseEntry,
// acs.Canonicalize, encoding/json), which then sees each byte once.
//
// Memory is one buffer, as large as the largest value read so far.
type valueReader struct {
	r   io.Reader
	buf []byte
	// buf[pos:end] is read from r and not yet consumed.
	pos, end int
	base     int64 // input offset of buf[0]
	err      error // what r returned last, once it is not nil
	// max bounds one value; maxValueBytes unless a Limits says less.
	max int
}

func newValueReader(r io.Reader) *valueReader {
	return &valueReader{r: r, buf: make([]byte, 64<<10), max: maxValueBytes}
}

// offset is the input offset of the next unconsumed byte.
func (v *valueReader) offset() int64 { return v.base + int64(v.pos) }

// fill reads more input behind buf[pos:end], first moving buf[pos:end] to
// the front of buf, and into a buffer twice as large when it fills buf. It
// reports false when the input has ended or failed and nothing was added.
func (v *valueReader) fill() bool {
	if v.pos > 0 {
		v.end = copy(v.buf, v.buf[v.pos:v.end])
		v.base += int64(v.pos)
		v.pos = 0
	}
	if v.end == len(v.buf) {
		buf := make([]byte, 2*len(v.buf))
		copy(buf, v.buf[:v.end])
		v.buf = buf
	}
	for v.err == nil {
		n, err := v.r.Read(v.buf[v.end:])
		v.end += n
		v.err = err
		if n > 0 {
			return true
		}
	}
	return false
}

// failed is the error for input that ended where more was needed.
func (v *valueReader) failed() error {
	if v.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return fmt.Errorf("couldn't read: %w", v.err)
}

// peek skips JSON whitespace and returns the next byte without consuming it.
func (v *valueReader) peek() (byte, error) {
	for {
		for ; v.pos < v.end; v.pos++ {
			if c := v.buf[v.pos]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return c, nil
			}
		}
		if !v.fill() {
			return 0, v.failed()
		}
	}
}

// atEnd skips JSON whitespace and reports whether the input ends there.
func (v *valueReader) atEnd() (bool, error) {
	_, err := v.peek()
	if err == io.ErrUnexpectedEOF {
		return true, nil
	}
	return false, err
}

// value returns the next value whole. It stays valid until the next call
// of any method.
func (v *valueReader) value() ([]byte, error) {
	c, err := v.peek()
	if err != nil {
		return nil, err
	}
	if c == ',' || c == ':' || c == ']' || c == '}' {
		return nil, invalidChar(c, "looking for beginning of value")
	}
	// acs's scanner finds the end, resuming where it stopped each time
	// more input arrives (from is relative to pos, which fill moves).
	var s acs.ValueScanner
	for from := 0; ; {
		if end := s.End(v.buf[v.pos:v.end], from); end >= 0 {
			return v.take(v.pos + end), nil
		}
		if from = v.end - v.pos; from > v.max {
			return nil, fmt.Errorf("value longer than %d bytes", v.max)
		}
		if !v.fill() {
			// A number or literal ends where the input does.
			if c != '"' && c != '{' && c != '[' && v.err == io.EOF {
				return v.take(v.end), nil
			}
			return nil, v.failed()
		}
	}
}

// take consumes buf[pos:end] and returns it.
func (v *valueReader) take(end int) []byte {
	b := v.buf[v.pos:end:end]
	v.pos = end
	return b
}

// open consumes the opening bracket of an object or array.
func (v *valueReader) open(bracket byte) error {
	c, err := v.peek()
	if err != nil {
		return err
	}
	if c != bracket {
		want := "an object"
		if bracket == '[' {
			want = "an array"
		}
		return fmt.Errorf("want %s, not %s", want, kindOrChar(c))
	}
	v.pos++
	return nil
}

// elements walks the array that starts next, calling f for each element
// with its 0-based index; f reads the element.
func (v *valueReader) elements(f func(i int) error) error {
	return v.walk('[', ']', "after array element", func(i int) error {
		if err := f(i); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		return nil
	})
}

// members walks the object that starts next, calling f with each member's
// name; f reads its value.
func (v *valueReader) members(f func(name string) error) error {
	return v.walk('{', '}', "after object member", func(int) error {
		c, err := v.peek()
		if err != nil {
			return err
		}
		if c != '"' {
			return invalidChar(c, "looking for beginning of object key string")
		}
		raw, err := v.value()
		if err != nil {
			return err
		}
		name, err := memberName(raw)
		if err != nil {
			return err
		}
		if c, err = v.peek(); err != nil {
			return err
		}
		if c != ':' {
			return invalidChar(c, "after object key")
		}
		v.pos++
		return f(name)
	})
}

// walk walks the array or object that starts next with open and ends with
// close, calling f for each element or member, with its 0-based index,
// once the ',' before it is consumed. after names the place of a byte that
// is neither ',' nor close, for its error.
func (v *valueReader) walk(open, close byte, after string, f func(i int) error) error {
	if err := v.open(open); err != nil {
		return err
	}
	for i := 0; ; i++ {
		c, err := v.peek()
		if err != nil {
			return err
		}
		switch {
		case c == close:
			v.pos++
			return nil
		case i > 0 && c != ',':
			return invalidChar(c, after)
		case i > 0:
			v.pos++
		}
		if err := f(i); err != nil {
			return err
		}
	}
}

// memberName decodes a member name, a JSON string, as strictly as
// acs.Canonicalize reads one: no invalid UTF-8, no lone surrogate.
func memberName(raw []byte) (string, error) {
	name := raw[1 : len(raw)-1]
	for _, c := range name {
		if c < ' ' || c == '\\' || c >= 0x80 {
			return escapedName(raw)
		}
	}
	return string(name), nil
}

func escapedName(raw []byte) (string, error) {
	canon, err := acs.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("member name: %w", err)
	}
	var name string
	if err := json.Unmarshal(canon, &name); err != nil {
		return "", fmt.Errorf("member name: %w", err)
	}
	return name, nil
}

// invalidChar is the error for byte c where it cannot be.
func invalidChar(c byte, where string) error {
	return fmt.Errorf("invalid character %q %s", rune(c), where)
}

// kindOrChar names the value that starts with c, or c itself.
func kindOrChar(c byte) string {
	switch k := acs.JSONKind(c); k {
	case "":
		return fmt.Sprintf("%q", rune(c))
	case "null":
		return k
	case "object", "array":
		return "an " + k
	default:
		return "a " + k
	}
}
