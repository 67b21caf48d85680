package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// corpusLines returns the lines of a corpus file, without their "\n".
func corpusLines(t testing.TB, file string) [][]byte {
	t.Helper()
	b := readTestFile(t, "testdata", "corpus", file)
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// member returns a string member of a JSON object line, "" if null or absent.
func member(t testing.TB, line []byte, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	var s *string
	if raw, ok := m[name]; ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("member %s: %v", name, err)
		}
	}
	if s == nil {
		return ""
	}
	return *s
}

func verifyFile(t *testing.T, file string) *Report {
	t.Helper()
	f := openTestFile(t, "testdata", "corpus", file)
	r, err := VerifyChain(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFindingFields checks what each finding says, not only its code:
// expected and actual are the documented values, and the entry is named.
func TestFindingFields(t *testing.T) {
	t.Parallel()
	// A value is the named member of the line at an index, or (recomputedHash)
	// the entry hash computed from that line; the zero value is "".
	const recomputedHash = "(recomputed)"
	type value struct {
		line   int
		member string
	}
	valueOf := func(t testing.TB, lines [][]byte, v value) string {
		switch v.member {
		case "":
			return ""
		case recomputedHash:
			e, err := acs.ParseEntry(lines[v.line])
			if err != nil {
				t.Fatal(err)
			}
			return acs.EntryHash(e.Content, e.PreviousHash).String()
		}
		return member(t, lines[v.line], v.member)
	}
	tests := []struct {
		file             string
		at               int // index into the report's findings
		code             string
		index            int
		expected, actual value
		message          string // a fragment of the message
	}{
		{"content_edited.jsonl", 0, CodeEntryHashMismatch, 6, value{6, recomputedHash}, value{6, "entry_hash"}, "not to its stated entry_hash"},
		{"entry_hash_absent.jsonl", 0, CodeEntryHashMismatch, 2, value{2, recomputedHash}, value{}, "has no entry_hash"},
		{"dropped.jsonl", 0, CodePreviousHashMismatch, 6, value{5, "entry_hash"}, value{6, "previous_hash"}, "is not the entry_hash"},
		{"previous_null.jsonl", 1, CodePreviousHashMismatch, 4, value{3, "entry_hash"}, value{}, "null previous_hash"},
		{"root_previous.jsonl", 0, CodeRootHasPrevious, 0, value{}, value{0, "previous_hash"}, "root of a chain has null"},
		{"inserted.jsonl", 0, CodePreviousHashMismatch, 7, value{6, "entry_hash"}, value{7, "previous_hash"}, "is not the entry_hash"},
		{"inserted.jsonl", 1, CodeFork, 7, value{6, "entry_hash"}, value{7, "entry_hash"}, "as entry 6, so the chain has two different entries"},
		{"forked.jsonl", 0, CodePreviousHashMismatch, 10, value{9, "entry_hash"}, value{10, "previous_hash"}, "of entry 9 before it"},
		{"forked.jsonl", 1, CodeFork, 10, value{6, "entry_hash"}, value{10, "entry_hash"}, "as entry 6,"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			lines := corpusLines(t, tt.file)
			r := verifyFile(t, tt.file)
			if len(r.Findings) <= tt.at {
				t.Fatalf("got %d findings, want more than %d", len(r.Findings), tt.at)
			}
			f := r.Findings[tt.at]
			want := Finding{
				Code:       tt.code,
				EntryIndex: tt.index,
				EntryID:    member(t, lines[tt.index], "entry_id"),
				StepID:     member(t, lines[tt.index], "step_id"),
				Expected:   valueOf(t, lines, tt.expected),
				Actual:     valueOf(t, lines, tt.actual),
				Message:    f.Message,
			}
			if f != want {
				t.Errorf("finding = %+v\nwant      %+v", f, want)
			}
			if !strings.Contains(f.Message, tt.message) {
				t.Errorf("message %q does not contain %q", f.Message, tt.message)
			}
			if strings.Count(f.Message, ". ") != 0 || !strings.HasSuffix(f.Message, ".") {
				t.Errorf("message %q is not one sentence", f.Message)
			}
			if f.Expected == f.Actual {
				t.Errorf("expected and actual are both %q", f.Expected)
			}
		})
	}
}

// TestForkFirstDivergence: a rewritten branch listed after the original
// yields findings at the first entry of the branch only (the broken link,
// previous_hash_mismatch, and beside it the fork), and nothing for the
// entries that follow it on the branch.
func TestForkFirstDivergence(t *testing.T) {
	t.Parallel()
	r := verifyFile(t, "forked.jsonl")
	if len(r.Findings) != 2 || r.Findings[0].Code != CodePreviousHashMismatch || r.Findings[1].Code != CodeFork ||
		r.Findings[0].EntryIndex != 10 || r.Findings[1].EntryIndex != 10 {
		t.Fatalf("findings = %+v, want previous_hash_mismatch and fork at entry 10", r.Findings)
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestVerifyChainInput(t *testing.T) {
	t.Parallel()
	valid := readTestFile(t, "testdata", "corpus", "valid.jsonl")
	lines := corpusLines(t, "valid.jsonl")
	join := func(ls ...[]byte) string { return string(bytes.Join(ls, []byte("\n"))) }

	// A valid entry longer than the line reader's buffer.
	long := []byte(fmt.Sprintf(`{"entry_id":"e-0","step_id":"req-1","step_type":"steps/userMessage","payload":%q}`, strings.Repeat("x", 600<<10)))
	le, err := acs.ParseEntry(long)
	if err != nil {
		t.Fatal(err)
	}
	long = fmt.Appendf(long[:len(long)-1], `,"entry_hash":"%s"}`, acs.EntryHash(le.Content, nil))

	ok := []struct {
		name, in string
		entries  int
	}{
		{"valid", string(valid), len(lines)},
		{"no final newline", join(lines...), len(lines)},
		{"blank lines at the end", string(valid) + "\n  \t\n\r\n", len(lines)},
		{"CRLF line ends", strings.ReplaceAll(string(valid), "\n", "\r\n"), len(lines)},
		{"line longer than the read buffer", string(long) + "\n", 1},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := VerifyChain(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Verified() || r.Entries != tt.entries {
				t.Errorf("verified %v, %d entries, findings %v; want verified, %d entries", r.Verified(), r.Entries, r.Findings, tt.entries)
			}
		})
	}

	bad := []struct {
		name string
		in   io.Reader
		line int
		msg  string
	}{
		{"empty", strings.NewReader(""), 1, "no context entries"},
		{"only blank lines", strings.NewReader("\n \n"), 1, "no context entries"},
		{"blank line between entries", strings.NewReader(join(lines[0], lines[1], nil, lines[2])), 3, "blank line between entries"},
		{"bad JSON on line 3", strings.NewReader(join(lines[0], lines[1], []byte(`{"entry_id":`), lines[3])), 3, "context entry"},
		{"not an object", strings.NewReader(join(lines[0], []byte(`["entry"]`))), 2, "must be a JSON object"},
		{"missing step_type", strings.NewReader(join(lines[0], []byte(`{"entry_id":"a","step_id":"b"}`))), 2, `"step_type"`},
		{"two objects on a line", strings.NewReader(join(lines[0], append(append([]byte{}, lines[1]...), lines[2]...))), 2, "context entry"},
		{"uppercase hash", strings.NewReader(join(lines[0], bytes.ToUpper(lines[1]))), 2, "context entry"},
		{"line too long", strings.NewReader(join(lines[0], bytes.Repeat([]byte(" "), MaxLineBytes+1))), 2, "longer than"},
		{"read error", &failingReader{data: []byte(join(lines[0], lines[1][:40])), err: errors.New("disk on fire")}, 2, "disk on fire"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := VerifyChain(tt.in)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("VerifyChain = %v, %v; want an *InputError", r, err)
			}
			if r != nil {
				t.Errorf("got a report with an input error")
			}
			if ie.Line != tt.line {
				t.Errorf("line = %d, want %d (%v)", ie.Line, tt.line, err)
			}
			if want := fmt.Sprintf("line %d: ", tt.line); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// TestChainVerifierIncremental feeds entries one by one and checks that
// Head follows the chain and that a valid chain yields no finding.
func TestChainVerifierIncremental(t *testing.T) {
	t.Parallel()
	var v ChainVerifier
	if !v.Head().IsZero() || v.Entries() != 0 {
		t.Fatal("zero ChainVerifier is not empty")
	}
	for i, line := range corpusLines(t, "valid.jsonl") {
		e, err := acs.ParseEntry(line)
		if err != nil {
			t.Fatal(err)
		}
		if fs := v.Add(e); fs != nil {
			t.Fatalf("entry %d: %v", i, fs)
		}
		if got, want := v.Head().String(), member(t, line, "entry_hash"); got != want {
			t.Fatalf("entry %d: Head = %s, want %s", i, got, want)
		}
		if v.Entries() != i+1 {
			t.Fatalf("Entries = %d, want %d", v.Entries(), i+1)
		}
	}
}

// TestImports keeps verify pure: it may import the acs packages, the
// transparency-log libraries it checks notes and proofs with, and the
// standard library, but nothing that reaches a database, the network, the
// file system or the clock; and nothing it depends on reaches a database
// or an HTTP server.
func TestImports(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if len(imports) == 0 {
		t.Fatal("go list printed no imports")
	}
	allowed := []string{
		"github.com/acsledger/acsledger/acs",
		"golang.org/x/mod/sumdb/note",
		"github.com/transparency-dev/merkle",
		"github.com/cloudflare/circl/sign/mldsa/mldsa44",
		// RFC 3161 time-stamps of checkpoints (timestamp.go): DER and CMS
		// parsing over crypto/x509, no network, no files.
		"github.com/digitorus/timestamp",
		"github.com/digitorus/pkcs7",
		// COSE receipts (cose.go, RFC 9942): COSE_Sign1 and CBOR, pure
		// encoding and signature libraries, no I/O.
		"github.com/veraison/go-cose",
		"github.com/fxamacker/cbor/v2",
	}
	sawACS := false
	for _, p := range imports {
		switch {
		case p == "github.com/acsledger/acsledger/acs":
			sawACS = true
		case strings.Contains(p, "."):
			ok := false
			for _, a := range allowed {
				ok = ok || p == a || strings.HasPrefix(p, a+"/")
			}
			if !ok {
				t.Errorf("verify imports %s; it may import only acs/..., the note, Merkle, ML-DSA-44, RFC 3161 and COSE/CBOR libraries and the standard library", p)
			}
		case p == "os" || p == "syscall" || strings.HasPrefix(p, "net") || strings.HasPrefix(p, "database/"):
			t.Errorf("verify imports %s; it must stay pure", p)
		}
	}
	if !sawACS {
		t.Errorf("imports %v do not include acs", imports)
	}
	out, err = exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, "database/") || d == "net/http" || strings.Contains(d, "pgx") || strings.Contains(d, "sqlite") {
			t.Errorf("verify depends on %s", d)
		}
	}
	// time is imported to read timestamps, never to read the clock.
	files := globTestFiles(t, "*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b := readTestFile(t, f)
		for _, call := range []string{"time.Now(", "time.Since(", "time.Until(", "time.Sleep("} {
			if strings.Contains(string(b), call) {
				t.Errorf("%s calls %s: verify must not read the clock", f, call)
			}
		}
	}
}

// TestForkWindow: a second branch naming a parent within the last
// ForkWindow entries is a fork; one naming a parent further back is still
// reported, as a broken link.
func TestForkWindow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("adds 65,000 entries")
	}
	mk := func(i int, prev *acs.Hash) (*acs.Entry, acs.Hash) {
		e, err := acs.ParseEntry([]byte(fmt.Sprintf(`{"entry_id":"e-%d","step_id":"s-%d","step_type":"steps/x"}`, i, i)))
		if err != nil {
			t.Fatal(err)
		}
		h := acs.EntryHash(e.Content, prev)
		e.PreviousHash, e.EntryHash = prev, &h
		return e, h
	}
	var v ChainVerifier
	var hashes []acs.Hash
	var prev *acs.Hash
	n := ForkWindow + 100
	for i := range n {
		e, h := mk(i, prev)
		if fs := v.Add(e); len(fs) != 0 {
			t.Fatalf("entry %d: %v", i, fs)
		}
		hashes = append(hashes, h)
		prev = &hashes[i]
	}
	// A branch from entry 50 (beyond the window) and one from entry n-50.
	far, _ := mk(-1, &hashes[50])
	if fs := v.Add(far); len(fs) != 1 || fs[0].Code != CodePreviousHashMismatch {
		t.Errorf("branch beyond the window: %v, want previous_hash_mismatch", fs)
	}
	near, _ := mk(-2, &hashes[n-50])
	if fs := v.Add(near); len(fs) != 2 || fs[0].Code != CodePreviousHashMismatch || fs[1].Code != CodeFork || fs[1].Expected != hashes[n-49].String() {
		t.Errorf("branch within the window: %v, want previous_hash_mismatch and a fork with entry %d", fs, n-49)
	}
	if n := len(v.children) + len(v.older); n > ForkWindow {
		t.Errorf("fork index holds %d parents, more than %d", n, ForkWindow)
	}
}
