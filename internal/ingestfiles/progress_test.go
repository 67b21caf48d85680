package ingestfiles

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/term"
)

// TestIngestProgress draws the terminal progress line: records, records/s
// and, from the share of the file read, the percentage and an ETA; done
// erases it. (Whether it is drawn at all is the terminal check of
// Run; the scripts show --json and pipes get none.)
func TestIngestProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	p := newProgress(&out, "in.jsonl", f)
	p.start = time.Now().Add(-2 * time.Second)
	if _, err := io.ReadFull(p, make([]byte, 250)); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		p.record()
	}
	got := out.String()
	want := regexp.MustCompile(`^\r\x1b\[Kin\.jsonl: 1 records, [0-9]+ records/s, 25%, ETA [0-9]+s$`)
	if !want.MatchString(got) {
		t.Fatalf("progress line %q", got)
	}
	p.done()
	if !bytes.HasSuffix(out.Bytes(), []byte("\r\x1b[K")) {
		t.Fatalf("not erased: %q", out.String())
	}
	if term.Is(f) {
		t.Fatal("a regular file taken for a terminal")
	}
}
