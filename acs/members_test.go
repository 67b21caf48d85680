package acs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func TestCanonicalMember(t *testing.T) {
	t.Parallel()
	obj := []byte(`{"a":[1,{"params":2}],"id":"x\"params\":{}","n":-1.5e-7,"params":{"b":[],"c":"}]"},"z":null}`)
	for _, tc := range []struct{ name, want string }{
		{"a", `[1,{"params":2}]`},
		{"id", `"x\"params\":{}"`},
		{"n", `-1.5e-7`},
		{"params", `{"b":[],"c":"}]"}`},
		{"z", `null`},
	} {
		if got := CanonicalMember(obj, tc.name); string(got) != tc.want {
			t.Errorf("CanonicalMember(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := CanonicalMember(obj, "b"); got != nil {
		t.Errorf("CanonicalMember of a nested member's name = %s, want nil", got)
	}
}

// TestCanonicalMemberRefuses: a value that is absent, or follows a
// malformed byte, is nil. A value position holding a closing bracket or a
// delimiter is no value (not an empty one), and nothing after it is read.
func TestCanonicalMemberRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ obj, name string }{
		{``, "params"},
		{`[]`, "params"},
		{`{}`, "params"},
		{`{"params"`, "params"},
		{`{"a":1}`, "params"},
		{`{"a":"x`, "params"},
		{`{"a":[1,"params"]}`, "params"},
		{`{"params":1`, "params"},
		{`{"params"1}`, "params"},
		{`{"params":}`, "params"},
		{`{"params":]`, "params"},
		{`{"a":},"params":1}`, "params"},
		{`{"a":,"params":1}`, "params"},
		{`{"a":1"params":2}`, "params"},
		{`{"a":1}}`, "params"},
		{`{"a":1},"params":2}`, "params"},
		{`{"a":{}}},"params":2}`, "params"},
		{`{,"params":1}`, "params"},
	} {
		if got := CanonicalMember([]byte(tc.obj), tc.name); got != nil {
			t.Errorf("CanonicalMember(%s, %q) = %q, want nil", tc.obj, tc.name, got)
		}
	}
}

// TestCanonicalElements: well-formed arrays yield their elements; a
// malformed one is refused, and an unbalanced closing bracket ends the
// walk instead of being read, again and again, as an empty element.
func TestCanonicalElements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arr  string
		want []string
		ok   bool
	}{
		{`[]`, nil, true},
		{`[1]`, []string{`1`}, true},
		{`[1,"a,]",{"b":[2]},[],null]`, []string{`1`, `"a,]"`, `{"b":[2]}`, `[]`, `null`}, true},
		{`[}]`, nil, false},
		{`[1,}]`, []string{`1`}, false},
		{`[1,]`, []string{`1`}, false},
		{`[1,,2]`, []string{`1`}, false},
		{`[1}`, []string{`1`}, false},
		{`[1`, nil, false},
		{`[1]]`, []string{`1`}, false},
		{`{}`, nil, false},
	} {
		var got []string
		ok := CanonicalElements([]byte(tc.arr), func(elem []byte) {
			if len(got) > 10 {
				t.Fatalf("CanonicalElements(%s) yields element after element: %q", tc.arr, got)
			}
			got = append(got, string(elem))
		})
		if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("CanonicalElements(%s) = %q, %v; want %q, %v", tc.arr, got, ok, tc.want, tc.ok)
		}
	}
}

// TestMembers: CanonicalMembers walks canonical bytes, JSONMembers any
// JSON a strict parser accepted (whitespace between tokens); both pass
// names as written, escapes and all, and stop at the first malformed byte.
func TestMembers(t *testing.T) {
	t.Parallel()
	walkers := map[string]func([]byte, func(k, v []byte) bool) bool{"CanonicalMembers": CanonicalMembers, "JSONMembers": JSONMembers}
	for _, tc := range []struct {
		walkers []string
		obj     string
		want    []string
		ok      bool
	}{
		{nil, `{}`, nil, true},
		{nil, `{"a":1,"b\"c":"}","d":{"e":[]}}`, []string{`a=1`, `b\"c="}"`, `d={"e":[]}`}, true},
		{nil, `{"a":1,}`, []string{`a=1`}, false},
		{nil, `{"a":}`, nil, false},
		{nil, `{"a":1}x`, []string{`a=1`}, false},
		{nil, `{"a":1`, nil, false},
		{nil, `[]`, nil, false},
		{[]string{"JSONMembers"}, " {} ", nil, true},
		{[]string{"JSONMembers"}, "{\n}", nil, true},
		{[]string{"JSONMembers"}, ` { "a" : 1 , "b\"c":"}" ,"d" : { "e" : [ ] } , "n":-1.5e3 } `, []string{`a=1`, `b\"c="}"`, `d={ "e" : [ ] }`, `n=-1.5e3`}, true},
		{[]string{"JSONMembers"}, "{\"t\":true\n}", []string{`t=true`}, true},
		{[]string{"JSONMembers"}, `{"a":1 ,}`, []string{`a=1`}, false},
		{[]string{"JSONMembers"}, `{"a": }`, nil, false},
		{[]string{"JSONMembers"}, `{"a":1} x`, []string{`a=1`}, false},
		{[]string{"JSONMembers"}, ` [ ]`, nil, false},
		// Whitespace is not canonical: the walk stops where it is.
		{[]string{"CanonicalMembers"}, `{"a":1 }`, []string{`a=1`}, false},
		{[]string{"CanonicalMembers"}, `{ "a":1}`, nil, false},
		{[]string{"CanonicalMembers"}, ` {}`, nil, false},
	} {
		names := tc.walkers
		if names == nil {
			names = []string{"CanonicalMembers", "JSONMembers"}
		}
		for _, name := range names {
			var got []string
			ok := walkers[name]([]byte(tc.obj), func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return true
			})
			if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s(%s) = %q, %v; want %q, %v", name, tc.obj, got, ok, tc.want, tc.ok)
			}
		}
	}
}

// FuzzCanonicalMembers holds the scanners to encoding/json on canonical
// input: the members and elements they find at the top level are the ones
// encoding/json decodes, each in canonical form, in order. On any input
// they must return.
//
//	go test ./acs -run XXX -fuzz FuzzCanonicalMembers -fuzztime 30s
func FuzzCanonicalMembers(f *testing.F) {
	fuzzSeeds(f)
	for _, s := range []string{`{"a":}`, `[}]`, `{"a":[1,}],"b":2}`, `{"params":{"x":[1,2,{"y":"}"}]},"z":1}`, `[1,"a",{"b":null},[true]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		CanonicalMember(in, "a")
		CanonicalElements(in, func([]byte) {})
		canon, err := Canonicalize(in)
		if err != nil {
			return
		}
		canonOf := func(raw []byte) []byte {
			c, err := Canonicalize(raw)
			if err != nil {
				t.Fatalf("Canonicalize(%s), a part of canonical %s: %v", raw, canon, err)
			}
			return c
		}
		// A ValueScanner ends a bracketed value or a string where it
		// ends, in one piece or two; a number or literal at the end of
		// the input is not known to have ended.
		want := len(canon)
		if c := canon[0]; c != '{' && c != '[' && c != '"' {
			want = -1
		}
		var whole, halves ValueScanner
		got := whole.End(canon, 0)
		if half := len(canon) / 2; half > 0 {
			if halves.End(canon[:half], 0) != -1 {
				t.Fatalf("ValueScanner ended %s within its first %d bytes", canon, half)
			}
			if g := halves.End(canon, half); g != got {
				t.Fatalf("ValueScanner ends %s at %d in one piece, at %d in two", canon, got, g)
			}
		}
		if got != want {
			t.Fatalf("ValueScanner ends %s at %d, want %d", canon, got, want)
		}
		switch canon[0] {
		case '{':
			var top map[string]json.RawMessage
			if err := json.Unmarshal(canon, &top); err != nil {
				t.Fatalf("encoding/json refuses canonical %s: %v", canon, err)
			}
			n := 0
			ok := CanonicalMembers(canon, func(k, v []byte) bool {
				var name string
				if err := json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &name); err != nil {
					t.Fatalf("member name %q of %s: %v", k, canon, err)
				}
				raw, found := top[name]
				if !found || !bytes.Equal(v, canonOf(raw)) {
					t.Fatalf("member %q of %s: scanned %s, encoding/json decodes %s", name, canon, v, raw)
				}
				if got := CanonicalMember(canon, name); !bytes.Equal(got, v) && bytes.IndexByte(k, '\\') < 0 {
					t.Fatalf("CanonicalMember(%s, %q) = %s, want %s", canon, name, got, v)
				}
				n++
				return true
			})
			if !ok || n != len(top) {
				t.Fatalf("CanonicalMembers(%s) saw %d members (ok %v); encoding/json decodes %d", canon, n, ok, len(top))
			}
			// JSONMembers reads the input as it came, whitespace and
			// escapes and all, to the same members.
			n = 0
			ok = JSONMembers(in, func(k, v []byte) bool {
				var name string
				if err := json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &name); err != nil {
					t.Fatalf("member name %q of %s: %v", k, in, err)
				}
				if raw, found := top[name]; !found || !bytes.Equal(canonOf(v), canonOf(raw)) {
					t.Fatalf("member %q of %s: JSONMembers scanned %s", name, in, v)
				}
				n++
				return true
			})
			if !ok || n != len(top) {
				t.Fatalf("JSONMembers(%s) saw %d members (ok %v); encoding/json decodes %d", in, n, ok, len(top))
			}
		case '[':
			var elems []json.RawMessage
			if err := json.Unmarshal(canon, &elems); err != nil {
				t.Fatalf("encoding/json refuses canonical %s: %v", canon, err)
			}
			i := 0
			ok := CanonicalElements(canon, func(e []byte) {
				if i >= len(elems) || !bytes.Equal(e, canonOf(elems[i])) {
					t.Fatalf("element %d of %s: scanned %s", i, canon, e)
				}
				i++
			})
			if !ok || i != len(elems) {
				t.Fatalf("CanonicalElements(%s) saw %d elements (ok %v); encoding/json decodes %d", canon, i, ok, len(elems))
			}
		default:
			if CanonicalMember(canon, "a") != nil || CanonicalMembers(canon, func(_, _ []byte) bool { return true }) || CanonicalElements(canon, func([]byte) {}) {
				t.Fatalf("a scanner read %s, not an object or array, as one", canon)
			}
		}
	})
}

// TestCanonicalMemberSpan: the place of a member is where its name's quote
// and its value are, first member or not.
func TestCanonicalMemberSpan(t *testing.T) {
	t.Parallel()
	obj := []byte(`{"a":1,"sig":{"k":"v"},"z":[]}`)
	for _, tc := range []struct {
		name             string
		start, vs, end   int
		ok               bool
		value, remaining string
	}{
		{"a", 1, 5, 6, true, `1`, `{"sig":{"k":"v"},"z":[]}`},
		{"sig", 7, 13, 22, true, `{"k":"v"}`, `{"a":1,"z":[]}`},
		{"z", 23, 27, 29, true, `[]`, `{"a":1,"sig":{"k":"v"}}`},
		{"k", 0, 0, 0, false, ``, ``},
	} {
		start, vs, end, ok := CanonicalMemberSpan(obj, tc.name)
		if start != tc.start || vs != tc.vs || end != tc.end || ok != tc.ok {
			t.Errorf("CanonicalMemberSpan(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.name, start, vs, end, ok, tc.start, tc.vs, tc.end, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		// Cutting the pair out with the comma before it (or, for the
		// first member, after it) leaves the canonical rest.
		if obj[start-1] == ',' {
			start--
		} else {
			end++
		}
		if v := string(obj[vs:tc.end]); v != tc.value {
			t.Errorf("value of %q = %s, want %s", tc.name, v, tc.value)
		}
		if rest := string(obj[:start]) + string(obj[end:]); rest != tc.remaining {
			t.Errorf("without %q: %s, want %s", tc.name, rest, tc.remaining)
		}
	}
}

// TestValueScannerInPieces: fed a value a piece at a time, split at every
// byte, a ValueScanner finds the end it finds in one piece, escapes across
// a split included; a number or literal at the end of its input is not yet
// known to have ended.
func TestValueScannerInPieces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in  string
		end int
	}{
		{`"a\"b\\"x`, 8},
		{`"\\\""]`, 6},
		{`{"a":["}",{"b":"\\"}]}, 1`, 22},
		{`[1,[2,[3]],"]"]`, 15},
		{`-1.5e3,`, 6},
		{"true ", 4},
		{`null}`, 4},
		{`123`, -1},
		{`{"a":1`, -1},
		{`"abc\"`, -1},
		{`]`, -2},
		{`,`, -2},
	} {
		var whole ValueScanner
		if got := whole.End([]byte(tc.in), 0); got != tc.end {
			t.Errorf("End(%s) = %d, want %d", tc.in, got, tc.end)
			continue
		}
		for split := 1; split < len(tc.in); split++ {
			var s ValueScanner
			got := s.End([]byte(tc.in[:split]), 0)
			if got < 0 && got != -2 {
				got = s.End([]byte(tc.in), split)
			}
			if got != tc.end {
				t.Errorf("End(%s) split at %d = %d, want %d", tc.in, split, got, tc.end)
			}
		}
	}
}
