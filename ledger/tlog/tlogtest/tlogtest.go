// Package tlogtest holds the fixed inputs of the Merkle log's tests (the
// origin, key seeds and stand-in entry hashes) and the checks they share
// that need none of the log's code. It imports neither ledger/tlog nor a
// database driver, so the log's own tests can use it; internal/tlogdb
// appends entries with these hashes to real stores.
package tlogtest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"
)

// Origin is the checkpoint origin of test logs.
const Origin = "acsledger.test/log"

// Seed returns a deterministic 32-byte key seed for label.
func Seed(label string) [32]byte {
	return sha256.Sum256([]byte("tlogtest key " + label))
}

// EntryHash is the stand-in entry_hash of the entry at pos of session.
func EntryHash(session string, pos int64) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos))
}

// ParseEntryProof parses a c2sp.org/tlog-proof document by hand, not with
// the log's parser: it checks the header names leaf index, and returns the
// inclusion proof's hashes and the checkpoint text after the empty line.
func ParseEntryProof(t testing.TB, doc []byte, index int64) ([][]byte, []byte) {
	t.Helper()
	head, cpText, ok := strings.Cut(string(doc), "\n\n")
	if !ok {
		t.Fatalf("no empty line in proof:\n%s", doc)
	}
	lines := strings.Split(head, "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || lines[1] != fmt.Sprintf("index %d", index) {
		t.Fatalf("proof header %q", lines[:2])
	}
	var p [][]byte
	for _, l := range lines[2:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil {
			t.Fatal(err)
		}
		p = append(p, h)
	}
	return p, []byte(cpText)
}

// OpenCheckpoint verifies a checkpoint with sumdb/note alone and parses its
// body by hand, not with the log's parser.
func OpenCheckpoint(t testing.TB, vkey string, signed []byte) (int64, sumtlog.Hash) {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		t.Fatalf("sumdb/note rejects checkpoint: %v\n%s", err, signed)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[0] != Origin {
		t.Fatalf("checkpoint text %q", n.Text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		t.Fatalf("root line %q", lines[2])
	}
	return size, sumtlog.Hash(root)
}

// Integrator is the log's integration step (tlog.Log.Integrate).
type Integrator interface {
	Integrate(ctx context.Context) (int, error)
}

// IntegrateAll runs the integrator until nothing is pending.
func IntegrateAll(t testing.TB, l Integrator) {
	t.Helper()
	for {
		n, err := l.Integrate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// Checkpointer serves the log's latest signed checkpoint
// (tlog.Log.Checkpoint).
type Checkpointer interface {
	Checkpoint(ctx context.Context) ([]byte, error)
}

// LatestCheckpoint reads l's latest checkpoint and opens it as
// OpenCheckpoint does; it returns the signed note too.
func LatestCheckpoint(t testing.TB, l Checkpointer, vkey string) (int64, sumtlog.Hash, []byte) {
	t.Helper()
	signed, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	size, root := OpenCheckpoint(t, vkey, signed)
	return size, root, signed
}
