package tlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

func TestPublishDirIsWriteOnce(t *testing.T) {
	t.Parallel()
	m := newMemStorage()
	dir := t.TempDir()
	l := newTestLog(t, m.storage(), Config{PublishDir: dir})
	_, vkeys := testKeys(t)
	m.addPending(0, 10)
	tlogtest.IntegrateAll(t, l)
	m.addPending(10, 5)
	tlogtest.IntegrateAll(t, l)
	for _, size := range []int64{10, 15} {
		name := filepath.Join(dir, fmt.Sprintf("checkpoint.%d", size))
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tlogtest.OpenCheckpoint(t, vkeys[0], b); got != size {
			t.Fatalf("%s holds size %d", name, got)
		}
	}
	// A second, different checkpoint for a published size is refused and
	// the published file is left alone.
	name := filepath.Join(dir, "checkpoint.15")
	before, _ := os.ReadFile(name)
	if err := publishCheckpoint(dir, 15, []byte("forged\n")); err == nil {
		t.Fatal("overwrote a published checkpoint")
	}
	if after, _ := os.ReadFile(name); string(after) != string(before) {
		t.Fatal("published checkpoint changed")
	}
	if err := publishCheckpoint(dir, 15, before); err != nil {
		t.Fatalf("republishing the same bytes: %v", err)
	}
	// VerifierKeysFor gives the keys the log uses.
	skeys, _ := testKeys(t)
	origin, got, err := VerifierKeysFor(Config{Origin: testOrigin, Keys: skeys})
	if err != nil || origin != testOrigin || strings.Join(got, "\n") != strings.Join(l.VerifierKeys(), "\n") || got[0] != vkeys[0] {
		t.Fatalf("VerifierKeysFor = %q %q %v", origin, got, err)
	}
}
