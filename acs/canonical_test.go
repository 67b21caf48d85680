package acs

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRFC8785Examples checks the worked examples of RFC 8785: §3.2.2
// (serialization of values) and §3.2.3 (member sorting by UTF-16 code
// units, with a non-BMP name that sorts before U+FB33).
func TestRFC8785Examples(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"values", "sorting"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name+".input.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name+".want.json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(in)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("Canonicalize:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestRFC8785Numbers checks the number serialization table of RFC 8785
// Appendix B, both through appendNumber and through Canonicalize of the
// shortest decimal that reads back as each double. The NaN and Infinity
// rows have no JSON spelling; what comes closest (a number too large for a
// double) must be refused.
func TestRFC8785Numbers(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/rfc8785/numbers.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		IEEE754 string
		Want    *string
		Note    string
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) != 26 {
		t.Fatalf("got %d vectors, want the 26 rows of RFC 8785 Appendix B", len(vectors))
	}
	for _, v := range vectors {
		t.Run(v.IEEE754, func(t *testing.T) {
			bits, err := strconv.ParseUint(v.IEEE754, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			f := math.Float64frombits(bits)
			if v.Want == nil {
				if !math.IsNaN(f) && !math.IsInf(f, 0) {
					t.Fatalf("vector without output is %v, want NaN or Inf", f)
				}
				_, err := Canonicalize([]byte("[1.8e308]"))
				if !errors.Is(err, ErrNumberRange) {
					t.Errorf("Canonicalize([1.8e308]) error = %v, want ErrNumberRange", err)
				}
				return
			}
			if got := string(appendNumber(nil, f)); got != *v.Want {
				t.Errorf("appendNumber(%v) = %s, want %s", f, got, *v.Want)
			}
			in := "[" + strconv.FormatFloat(f, 'g', -1, 64) + "]"
			got, err := Canonicalize([]byte(in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", in, err)
			}
			if want := "[" + *v.Want + "]"; string(got) != want {
				t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
			}
		})
	}
}

// TestNumberFastPath checks numbers our fast path copies against the float
// path's answer, including the edges of the rule in isShortestPlain.
func TestNumberFastPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0.0", "0"},
		{"7", "7"},
		{"-12", "-12"},
		{"999999999999999", "999999999999999"},
		{"9999999999999999", "10000000000000000"},
		{"9007199254740993", "9007199254740992"},
		{"100000000000000000000", "100000000000000000000"},
		{"1000000000000000000000", "1e+21"},
		{"0.8125", "0.8125"},
		{"0.1", "0.1"},
		{"1.50", "1.5"},
		{"123456789012.345", "123456789012.345"},
		{"1234567890123.4567", "1234567890123.4568"},
		{"0.000001", "0.000001"},
		{"0.0000001", "1e-7"},
		{"0.000001234567890123456", "0.000001234567890123456"},
		{"0.12345678901234567", "0.12345678901234566"},
		{"-0.5", "-0.5"},
		{"1E2", "100"},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"2.5e-324", "5e-324"},
	} {
		got, ok := checkCanonical(t, tc.in, tc.want)
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(tc.in, 64)
		if slow := string(appendNumber(nil, f)); slow != string(got) {
			t.Errorf("Canonicalize(%s) = %s, but the float path gives %s", tc.in, got, slow)
		}
	}
}

// TestStrings checks RFC 8785 §3.2.2.2 string serialization: only the
// short escapes and \u00xx for other controls; everything else literal.
func TestStrings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"\u0000\u0001\u001f"`, `"\u0000\u0001\u001f"`},
		{`"\u0008\u0009\u000a\u000c\u000d"`, `"\b\t\n\f\r"`},
		{`"\b\t\n\f\r"`, `"\b\t\n\f\r"`},
		{`"\"\\\/"`, `"\"\\/"`},
		{`"\u0022\u005C\u002F"`, `"\"\\/"`},
		{`"\u007f\u0080\u00e9\u2028\u2029"`, "\"\u007f\u0080\u00e9\u2028\u2029\""},
		{`"\uD83D\uDE00"`, "\"\U0001F600\""},
		{"\"\U0001F600 é \u2028\"", "\"\U0001F600 é \u2028\""},
		{`"\uFFFF\uFEFF"`, "\"\uffff\ufeff\""},
		{`"0123456789abcdef0123456789abcdef\n"`, `"0123456789abcdef0123456789abcdef\n"`},
	} {
		checkCanonical(t, tc.in, tc.want)
	}
}

// TestStructure checks whitespace, nesting and member order.
func TestStructure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{" \t\r\n{ \"b\" : [ 1 , { } , [ ] ] , \"a\" : null } \n", `{"a":null,"b":[1,{},[]]}`},
		{`{"b":{"d":1,"c":2},"a":{"f":[{"h":1,"g":2}],"e":true}}`, `{"a":{"e":true,"f":[{"g":2,"h":1}]},"b":{"c":2,"d":1}}`},
		{`{"a\u0000":1,"a":2}`, `{"a":2,"a\u0000":1}`},
		{`{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"{\"\uffff\":1,\"\U00010000\":2}", "{\"\U00010000\":2,\"\uffff\":1}"},
		{"{\"\ue000\":1,\"\U0010ffff\":2,\"\ud7ff\":3}", "{\"\ud7ff\":3,\"\U0010ffff\":2,\"\ue000\":1}"},
		{`{"\"":1,"!":2,"#":3}`, `{"!":2,"\"":1,"#":3}`},
		{`{"\n":1,"\u0001":2}`, `{"\u0001":2,"\n":1}`},
		{`true`, `true`},
		{`"x"`, `"x"`},
		{` 42 `, `42`},
	} {
		checkCanonical(t, tc.in, tc.want)
	}
	// Many members out of order take the general sort.
	var b strings.Builder
	b.WriteString("{")
	for i := 40; i > 0; i-- {
		if i < 40 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	b.WriteString("}")
	got, err := Canonicalize([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), `{"k1":1,"k10":10,"k11":11,`) || !strings.HasSuffix(string(got), `"k8":8,"k9":9}`) {
		t.Errorf("40 members: got %s", got)
	}
}

// refusal is one bad input, the class of error it must produce, the byte
// offset the error must name, and text the message must contain.
type refusal struct {
	name   string
	in     string
	offset int
	text   string
}

func checkRefusals(t *testing.T, kind error, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(tc.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %s, want an error", tc.in, out)
			}
			if !errors.Is(err, kind) {
				t.Errorf("error %q is not %v", err, kind)
			}
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error %q is not a *JSONError", err)
			}
			if je.Offset != tc.offset {
				t.Errorf("error %q: offset %d, want %d", err, je.Offset, tc.offset)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "at byte "+strconv.Itoa(tc.offset)) {
				t.Errorf("error %q does not say %q at byte %d", err, tc.text, tc.offset)
			}
		})
	}
}

func TestRefuseDuplicates(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrDuplicateMember, []refusal{
		{"adjacent", `{"a":1,"a":2}`, 7, `duplicate member "a"`},
		{"apart sorted", `{"a":1,"b":2,"a":3}`, 13, `duplicate member "a"`},
		{"apart unsorted", `{"c":1,"b":2,"c":3}`, 13, `duplicate member "c"`},
		{"escaped", `{"a":1,"\u0061":2}`, 7, `duplicate member "a"`},
		{"escaped surrogate pair", "{\"\\ud83d\\ude00\":1,\"\U0001F600\":2}", 18, `duplicate member "😀"`},
		{"nested", `{"x":{"k":1,"j":0,"k":2}}`, 18, `duplicate member "k"`},
		{"first of several", `{"z":0,"b":1,"a":2,"b":3,"a":4}`, 19, `duplicate member "b"`},
		{"empty name", `{"":1,"":2}`, 6, `duplicate member ""`},
	})
}

func TestRefuseInvalidUTF8(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrInvalidUTF8, []refusal{
		{"stray continuation", "\"a\x80\"", 2, "invalid UTF-8 byte 0x80"},
		{"0xff", "[\"\xff\"]", 2, "invalid UTF-8 byte 0xff"},
		{"truncated sequence", "\"\xe2\x82\"", 1, "invalid UTF-8 byte 0xe2"},
		{"overlong", "\"\xc0\xaf\"", 1, "invalid UTF-8 byte 0xc0"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", 1, "invalid UTF-8 byte 0xed"},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", 1, "invalid UTF-8 byte 0xf4"},
		{"in member name", "{\"k\xfe\":1}", 3, "invalid UTF-8 byte 0xfe"},
	})
}

func TestRefuseLoneSurrogates(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrLoneSurrogate, []refusal{
		{"high at end", `"\ud800"`, 1, `high surrogate \ud800 not followed by a low surrogate`},
		{"high then text", `"ab\uD83Dx"`, 3, `high surrogate \uD83D`},
		{"high then high", `"\ud83d\ud83d"`, 1, `high surrogate \ud83d`},
		{"high then escape", `"\ud83d\n"`, 1, `high surrogate \ud83d`},
		{"low alone", `"\udc00"`, 1, `low surrogate \udc00 without a high surrogate`},
		{"low first", `["\ude00\ud83d"]`, 2, `low surrogate \ude00`},
		{"in member name", `{"\udfff":1}`, 2, `low surrogate \udfff`},
	})
}

func TestRefuseTrailingData(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrTrailingData, []refusal{
		{"second value", `{} {}`, 3, "unexpected character '{' after the JSON value"},
		{"after number", `12 3`, 3, "unexpected character '3' after the JSON value"},
		{"bracket", `[1]]`, 3, "unexpected character ']' after the JSON value"},
		{"nul", "true\x00", 4, "unexpected byte 0x0 after the JSON value"},
		{"letter after literal", `nullx`, 4, "unexpected character 'x'"},
	})
}

func TestRefuseNumberRange(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrNumberRange, []refusal{
		{"1e400", `[1e400]`, 1, `number "1e400" is outside the IEEE 754 double range`},
		{"negative", `{"n":-1e400}`, 5, `number "-1e400"`},
		{"just above max", `1.7976931348623159e308`, 0, `number "1.7976931348623159e308"`},
		{"long integer", strings.Repeat("9", 400), 0, "is outside the IEEE 754 double range"},
	})
}

func TestRefuseTooDeep(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Canonicalize([]byte(ok)); err != nil {
		t.Fatalf("nesting of exactly MaxDepth: %v", err)
	}
	checkRefusals(t, ErrTooDeep, []refusal{
		{"arrays", strings.Repeat("[", MaxDepth+1), MaxDepth, "nested deeper than 256"},
		{"objects", strings.Repeat(`{"a":`, MaxDepth+1), 5 * MaxDepth, "nested deeper than 256"},
		{"mixed", strings.Repeat(`[{"a":`, MaxDepth), 6 * (MaxDepth / 2), "nested deeper than 256"},
	})
}

func TestRefuseMalformed(t *testing.T) {
	t.Parallel()
	checkRefusals(t, ErrMalformed, []refusal{
		{"empty", ``, 0, "unexpected end of input, expected a value"},
		{"only space", "  \n", 3, "unexpected end of input"},
		{"bare word", `nul`, 0, "invalid literal, expected null"},
		{"capital literal", `True`, 0, "unexpected character 'T', expected a value"},
		{"unterminated string", `"abc`, 0, "unterminated string"},
		{"unterminated escape", `"abc\`, 0, "unterminated string"},
		{"raw newline", "\"a\nb\"", 2, "control character 0xa in string must be escaped"},
		{"raw tab", "\"\t\"", 1, "control character 0x9"},
		{"bad escape", `"\x41"`, 1, `invalid escape "\\x"`},
		{"short \\u", `"\u12"`, 1, `invalid \u escape`},
		{"bad hex", `"\u12g4"`, 1, `invalid \u escape`},
		{"leading zero", `[01]`, 1, "leading zero"},
		{"leading zero negative", `-012`, 0, "leading zero"},
		{"lone minus", `[-]`, 2, "expected a digit after '-'"},
		{"plus sign", `+1`, 0, "unexpected character '+'"},
		{"trailing dot", `1.`, 2, "expected a digit after '.'"},
		{"leading dot", `.5`, 0, "unexpected character '.'"},
		{"empty exponent", `1e`, 2, "expected a digit in the exponent"},
		{"signed empty exponent", `1e+]`, 3, "expected a digit in the exponent"},
		{"hex number", `[0x10]`, 2, "unexpected character 'x', expected ',' or ']'"},
		{"NaN", `NaN`, 0, "unexpected character 'N'"},
		{"Infinity", `[-Infinity]`, 2, "expected a digit after '-'"},
		{"unclosed array", `[1,2`, 4, "unexpected end of input in array opened at byte 0"},
		{"unclosed object", `{"a":1`, 6, "unexpected end of input in object opened at byte 0"},
		{"trailing comma array", `[1,]`, 3, "unexpected character ']', expected a value"},
		{"trailing comma object", `{"a":1,}`, 7, "expected a member name in double quotes"},
		{"missing comma", `[1 2]`, 3, "expected ',' or ']' after array element"},
		{"missing colon", `{"a" 1}`, 5, `expected ':' after member name "a"`},
		{"missing value", `{"a":}`, 5, "expected a value"},
		{"unquoted name", `{a:1}`, 1, "expected a member name in double quotes"},
		{"single quotes", `{'a':1}`, 1, "unexpected character '\\''"},
		{"comment", `[1/*x*/]`, 2, "unexpected character '/'"},
		{"byte order mark", "\xef\xbb\xbf{}", 0, "unexpected byte 0xef, expected a value"},
		{"object close in array", `[1}`, 2, "expected ',' or ']'"},
		{"array close in object", `{"a":1]`, 6, "expected ',' or '}'"},
	})
}

// checkCanonical canonicalizes in and reports a difference from want; ok is
// false when in was refused.
func checkCanonical(t *testing.T, in, want string) (got []byte, ok bool) {
	t.Helper()
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Errorf("Canonicalize(%s): %v", in, err)
		return nil, false
	}
	if string(got) != want {
		t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
	}
	return got, true
}
