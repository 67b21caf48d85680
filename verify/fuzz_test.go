package verify

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzVerifyChain feeds arbitrary bytes to the JSON Lines chain reader: it
// must never panic, an input error must name a line that exists, and a
// report must be consistent with itself.
func FuzzVerifyChain(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus files: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(""))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"entry_id":"a","step_id":"b","step_type":"c","entry_hash":null}` + "\n\n"))
	f.Add([]byte(`{"entry_id":"a","step_id":"b","step_type":"c","previous_hash":"` + strings.Repeat("0", 64) + `"}`))

	codes := map[string]bool{CodeEntryHashMismatch: true, CodePreviousHashMismatch: true, CodeRootHasPrevious: true, CodeFork: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := VerifyChain(bytes.NewReader(data))
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			if lines := bytes.Count(data, []byte("\n")) + 1; ie.Line < 1 || ie.Line > lines {
				t.Fatalf("error names line %d of input with %d lines: %v", ie.Line, lines, err)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", ie.Line)) {
				t.Fatalf("error %q does not start with its line", err)
			}
			return
		}
		if r.Entries < 1 {
			t.Fatalf("report with %d entries", r.Entries)
		}
		last := -1
		for _, f := range r.Findings {
			if !codes[f.Code] || f.EntryIndex < last || f.EntryIndex >= r.Entries || f.Message == "" || f.Expected == f.Actual {
				t.Fatalf("bad finding %+v in a report of %d entries", f, r.Entries)
			}
			last = f.EntryIndex
		}
	})
}
