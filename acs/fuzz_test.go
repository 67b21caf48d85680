package acs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// fuzzSeeds are inputs for both fuzz targets: the RFC examples, the
// benchmark entry, the entry vectors, and one of each refusal class.
func fuzzSeeds(f *testing.F) {
	for _, name := range []string{"values.input.json", "sorting.input.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "rfc8785", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, err := os.ReadFile("testdata/bench_entry.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for i, v := range loadEntryVectors(f) {
		if i%6 == 0 {
			f.Add([]byte(v.Entry))
		}
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"b":1,"a":2,"\u0061":3}`, "\"\xff\"", `"\ud800"`, `"\udc00\ud800"`,
		`[1e400]`, `[-1e-400]`, `{} {}`, `[01]`, `[1.]`, `[-]`, `1e+`, `"\u00zz"`,
		`[0.1,1e21,1e-7,-0,5e-324,9007199254740993,0.000001,123456789012345678901]`,
		`{"\ue000":1,"\U00010000":2,"😀":3,"\uffff":4}`, strings.Repeat("[", 300),
		`{"entry_id":"e","step_id":"s","step_type":"t","entry_hash":null,"previous_hash":null,"x":{"entry_hash":1}}`,
		"\"\u2028\\u2029\\/\\b\\f\\n\\r\\t\\u0001\x7f\"", ` true `, `null`, `"`, `{"a"`, `{"a":`, `[1,`,
	} {
		f.Add([]byte(s))
	}
}

// strict reports whether err is one of the documented refusals of input
// that gowebpki/jcs accepts.
func strict(err error) bool {
	return errors.Is(err, ErrTooDeep) || errors.Is(err, ErrDuplicateMember) ||
		errors.Is(err, ErrLoneSurrogate) || errors.Is(err, ErrNumberRange) ||
		errors.Is(err, ErrInvalidUTF8)
}

// FuzzCanonicalize checks Canonicalize against gowebpki/jcs: where both
// accept, the bytes must be identical; where only gowebpki accepts, the
// refusal must be one of our documented strictness cases; where we accept,
// gowebpki must too. Every output must canonicalize to itself.
func FuzzCanonicalize(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonicalize(in)
		want, werr := jcs.Transform(in)
		if err != nil {
			var je *JSONError
			if !errors.As(err, &je) || je.Offset < 0 || je.Offset > len(in) {
				t.Fatalf("Canonicalize(%q): error %v is not a *JSONError inside the input", in, err)
			}
			if werr == nil && !strict(err) {
				t.Fatalf("Canonicalize(%q) refused (%v) what gowebpki/jcs accepts as %q", in, err, want)
			}
			return
		}
		if werr != nil {
			t.Fatalf("Canonicalize(%q) = %q, but gowebpki/jcs refuses it: %v", in, got, werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonicalize(%q)\n got %q\nwant %q (gowebpki/jcs)", in, got, want)
		}
		again, err := Canonicalize(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("Canonicalize is not idempotent on %q: %q, %v", got, again, err)
		}
	})
}

// FuzzParseEntry checks that ParseEntry agrees with Canonicalize: an entry
// it accepts canonicalizes, its content is canonical, and its content is
// the canonical entry with only the top-level links removed.
func FuzzParseEntry(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := ParseEntry(in)
		full, cerr := Canonicalize(in)
		if err != nil {
			var je *JSONError
			if errors.As(err, &je) && cerr == nil {
				t.Fatalf("ParseEntry(%q) refused JSON that Canonicalize accepts: %v", in, err)
			}
			return
		}
		if cerr != nil {
			t.Fatalf("ParseEntry(%q) accepted JSON that Canonicalize refuses: %v", in, cerr)
		}
		again, err := Canonicalize(e.Content)
		if err != nil || !bytes.Equal(again, e.Content) {
			t.Fatalf("ParseEntry(%q).Content %q is not canonical", in, e.Content)
		}
		// Removing the two links from the full canonical form, by
		// reparsing it, must give the same content.
		e2, err := ParseEntry(full)
		if err != nil || !bytes.Equal(e2.Content, e.Content) {
			t.Fatalf("ParseEntry of the canonical form differs: %q vs %q (%v)", e2.Content, e.Content, err)
		}
		if len(e.Content) > len(full) {
			t.Fatalf("content %q longer than the entry %q", e.Content, full)
		}
	})
}

// TestRoundTrip checks Canonicalize(Canonicalize(x)) == Canonicalize(x)
// over every seed-like input that is accepted.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	inputs := [][]byte{}
	for _, v := range loadEntryVectors(t) {
		inputs = append(inputs, []byte(v.Entry), []byte(v.Content))
	}
	b, _ := os.ReadFile("testdata/bench_entry.json")
	inputs = append(inputs, b)
	for _, in := range inputs {
		once, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", in, err)
		}
		twice, err := Canonicalize(once)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("not idempotent:\n once %q\ntwice %q (%v)", once, twice, err)
		}
	}
}
