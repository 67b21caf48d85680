package tlog

import (
	"context"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/verify"
)

func newTestLog(t testing.TB, s Storage, cfg Config) *Log {
	t.Helper()
	skeys, _ := testKeys(t)
	cfg.Origin = testOrigin
	cfg.Keys = skeys
	l, err := New(context.Background(), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Adding a post-quantum key later must not strand checkpoints signed before.
func TestAddingAKeyKeepsTheLogOpen(t *testing.T) {
	t.Parallel()
	s := newMemStorage()
	skeys, vkeys := testKeys(t)
	ctx := context.Background()
	l, err := New(ctx, s.storage(), Config{Origin: testOrigin, Keys: skeys[:1]})
	if err != nil {
		t.Fatal(err)
	}
	s.addPending(0, 5)
	tlogtest.IntegrateAll(t, l)
	l2, err := New(ctx, s.storage(), Config{Origin: testOrigin, Keys: skeys})
	if err != nil {
		t.Fatalf("reopening with an added key: %v", err)
	}
	s.addPending(5, 5)
	tlogtest.IntegrateAll(t, l2)
	signed, err := l2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, _ := verify.NoteVerifier(vkeys[1])
	if _, err := note.Open(signed, note.VerifierList(pq)); err != nil {
		t.Fatalf("new checkpoint lacks the added key's signature: %v", err)
	}
	// Dropping the Ed25519 key is refused.
	if _, err := New(ctx, s.storage(), Config{Origin: testOrigin, Keys: skeys[1:]}); err == nil {
		t.Fatal("a log without an Ed25519 first key was opened")
	}
}
