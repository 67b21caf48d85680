package verify

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/gowebpki/jcs"
)

// TestMangle changes every byte of a valid chain file to every other byte
// value, one change at a time. Each changed file must either be refused as
// input or produce at least one finding, unless the change is void under
// RFC 8785: then every line has the same canonical form as before (compared
// with gowebpki/jcs, independently of package acs) and the chain must
// verify. With -short, and under the race detector, only single-bit flips
// are tried.
func TestMangle(t *testing.T) {
	t.Parallel()
	valid := readTestFile(t, "testdata", "corpus", "valid.jsonl")
	lines := bytes.SplitAfter(valid, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the final "\n"
	entries := make([]*acs.Entry, len(lines))
	canon := make([][]byte, len(lines))
	for i, l := range lines {
		var err error
		if entries[i], err = acs.ParseEntry(l); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if canon[i], err = jcs.Transform(l); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
	}

	replacements := func(orig byte) []byte {
		var bs []byte
		if testing.Short() || raceEnabled {
			for bit := range 8 {
				bs = append(bs, orig^1<<bit)
			}
			return bs
		}
		for b := range 256 {
			if byte(b) != orig {
				bs = append(bs, byte(b))
			}
		}
		return bs
	}

	for i, line := range lines {
		start := 0 // offset of the line in the file
		for _, l := range lines[:i] {
			start += len(l)
		}
		t.Run(fmt.Sprintf("line%d", i+1), func(t *testing.T) {
			t.Parallel()
			var refused, found, void int
			mut := make([]byte, len(valid))
			for p := range line {
				orig := line[p]
				for _, b := range replacements(orig) {
					if orig == '\n' || b == '\n' {
						// The line breaks move: replay the whole file.
						copy(mut, valid)
						mut[start+p] = b
						switch outcome(t, mut, canon) {
						case "refused":
							refused++
						case "found":
							found++
						case "void":
							t.Logf("void: byte %d of line %d changed from %q to %q", p, i+1, orig, b)
							void++
						}
						continue
					}
					// Only this line changes: parse it, and replay the chain
					// from the entries already parsed.
					ml := bytes.Clone(line)
					ml[p] = b
					e, err := parseLine(ml, i+1)
					if err != nil {
						refused++
						continue
					}
					var v ChainVerifier
					var fs []Finding
					for j, ent := range entries {
						if j == i {
							ent = e
						}
						fs = append(fs, v.Add(ent)...)
					}
					if len(fs) > 0 {
						found++
						continue
					}
					c, err := jcs.Transform(ml)
					if err != nil || !bytes.Equal(c, canon[i]) {
						t.Errorf("byte %d of line %d changed from %q to %q: accepted without a finding, and not void under RFC 8785:\n%s", p, i+1, orig, b, ml)
						continue
					}
					t.Logf("void: byte %d of line %d changed from %q to %q", p, i+1, orig, b)
					void++
				}
			}
			t.Logf("refused %d, found %d, void %d", refused, found, void)
			if found == 0 || refused == 0 {
				t.Errorf("refused %d, found %d: the test is not exercising both outcomes", refused, found)
			}
		})
	}
}

// outcome replays a whole changed file and classifies the result, failing
// the test for a change that is accepted without a finding but is not void.
func outcome(t *testing.T, file []byte, canon [][]byte) string {
	t.Helper()
	r, err := VerifyChain(bytes.NewReader(file))
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		return "refused"
	case err != nil:
		t.Fatalf("VerifyChain returned a non-input error: %v", err)
	case !r.Verified():
		return "found"
	}
	got := bytes.Split(bytes.TrimRight(file, " \t\r\n"), []byte("\n"))
	if len(got) != len(canon) {
		t.Errorf("changed file with %d lines verified without a finding:\n%s", len(got), file)
		return ""
	}
	for i, l := range got {
		c, err := jcs.Transform(l)
		if err != nil || !bytes.Equal(c, canon[i]) {
			t.Errorf("changed line %d verified without a finding and is not void under RFC 8785:\n%s", i+1, l)
			return ""
		}
	}
	return "void"
}
