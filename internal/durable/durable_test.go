package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, []byte("checkpoint\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "checkpoint\n" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// f is closed: writing to it again fails, and so does Write.
	if err := Write(f, []byte("more")); err == nil {
		t.Fatal("Write to a closed file succeeded")
	}
}
