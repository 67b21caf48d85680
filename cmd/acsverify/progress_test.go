package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/term"
)

// TestProgress reads 10 MiB through a progress reader on a fake clock that
// advances 100 ms a read: it must redraw every second read, report the
// share read, and erase its line at EOF.
func TestProgress(t *testing.T) {
	t.Parallel()
	const total = 10 << 20
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(100 * time.Millisecond); return clock }
	var out bytes.Buffer
	p := newProgress(io.LimitReader(zeros{}, total), &out, "big.jsonl", total, now)
	buf := make([]byte, 1<<20)
	reads := 0
	for {
		_, err := p.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		reads++
	}
	if reads != 10 {
		t.Fatalf("%d reads, want 10", reads)
	}
	s := out.String()
	if got := strings.Count(s, "\r\x1b[Kbig.jsonl: "); got != 5 {
		t.Errorf("%d progress lines, want 5:\n%q", got, s)
	}
	if !strings.Contains(s, "big.jsonl: 2.0 of 10.0 MiB (20%)") || !strings.Contains(s, "big.jsonl: 10.0 of 10.0 MiB (100%)") {
		t.Errorf("progress lines do not show the share read:\n%q", s)
	}
	if !strings.HasSuffix(s, "\r\x1b[K") {
		t.Errorf("line not erased at EOF:\n%q", s)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// TestProgressNotOnPipe: with stderr not a terminal, the input is returned
// as it is.
func TestProgressNotOnPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "big")
	if err := os.WriteFile(name, make([]byte, progressMin), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	if r := progressReader(f, "big", errf); r != io.Reader(f) {
		t.Errorf("progressReader wrapped the input although stderr is a regular file")
	}
	if !term.Is(mustOpen(t, os.DevNull)) {
		t.Errorf("term.Is(%s) = false; a character device counts", os.DevNull)
	}
}

func mustOpen(t *testing.T, name string) *os.File {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
