package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// testWriters: a session is owned by the kind of writer that created it
// and refuses records of the other kind, in Append, AppendBatch (all or
// nothing) and StepRecorder.AppendRequest, writing nothing of them.
func testWriters(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	fx := Fixtures(t)
	for _, w := range []string{"", ledger.WriterExternal, ledger.WriterGuardian} {
		if _, err := s.Append(ctx, ledger.Record{SessionID: "own-" + w, AgentID: "a", Entry: fx[0], Writer: w}); err != nil {
			t.Fatalf("writer %q: %v", w, err)
		}
	}
	for id, want := range map[string]string{"own-": ledger.WriterExternal, "own-external": ledger.WriterExternal, "own-guardian": ledger.WriterGuardian} {
		se, err := s.Session(ctx, id)
		if err != nil || se.Writer != want {
			t.Fatalf("session %s: writer %q, %v; want %q", id, se.Writer, err, want)
		}
	}
	refused := func(what string, err error, writer, owner string) {
		t.Helper()
		var wm *ledger.WriterMismatchError
		if !errors.As(err, &wm) || !errors.Is(err, ledger.ErrWriterMismatch) || wm.Writer != writer || wm.Owner != owner {
			t.Fatalf("%s: %v, want a WriterMismatchError from %s into %s", what, err, writer, owner)
		}
	}
	_, err := s.Append(ctx, ledger.Record{SessionID: "own-guardian", Entry: fx[1]})
	refused("plain append into a Guardian session", err, ledger.WriterExternal, ledger.WriterGuardian)
	_, err = s.Append(ctx, ledger.Record{SessionID: "own-external", Entry: fx[1], Writer: ledger.WriterGuardian})
	refused("Guardian append into an external session", err, ledger.WriterGuardian, ledger.WriterExternal)
	_, err = s.AppendBatch(ctx, []ledger.Record{
		{SessionID: "own-external", Entry: fx[1]},
		{SessionID: "own-guardian", Entry: fx[1]},
	})
	refused("batch", err, ledger.WriterExternal, ledger.WriterGuardian)
	// A new session's first record decides its owner for the records
	// after it in the same batch.
	_, err = s.AppendBatch(ctx, []ledger.Record{
		{SessionID: "own-new", Entry: fx[0], Writer: ledger.WriterGuardian},
		{SessionID: "own-new", Entry: fx[1]},
	})
	refused("batch creating a session", err, ledger.WriterExternal, ledger.WriterGuardian)
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "own-external", Entry: fx[1]}, []byte(`{}`), requestKey("req-own"),
		func(ledger.Appended) ([]byte, error) { return []byte(`{}`), nil })
	refused("AppendRequest into an external session", err, ledger.WriterGuardian, ledger.WriterExternal)
	for _, id := range []string{"own-external", "own-guardian"} {
		if se, err := s.Session(ctx, id); err != nil || se.Length != 1 {
			t.Fatalf("session %s after refusals: %+v, %v", id, se, err)
		}
	}
	if _, err := s.Session(ctx, "own-new"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a refused batch created its session: %v", err)
	}
	if _, err := s.Append(ctx, ledger.Record{SessionID: "own-x", Entry: fx[0], Writer: "admin"}); !errors.Is(err, ledger.ErrInvalidEntry) {
		t.Fatalf("unknown writer kind: %v", err)
	}
}

// testExpectHead: a record with Expect is a compare-and-swap on the head
// it was decided against: a session that moved (or exists when it was
// expected not to) is a HeadMovedError naming both heads, nothing is
// written, and an idempotent retry of a stored step is still judged a
// retry.
func testExpectHead(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	fx := Fixtures(t)
	none := &ledger.Head{}
	a0, err := s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[0], Expect: none})
	if err != nil {
		t.Fatalf("first append expecting no session: %v", err)
	}
	at1 := &ledger.Head{Length: 1, Hash: a0.EntryHash}
	moved := func(what string, err error, want, got ledger.Head) {
		t.Helper()
		var hm *ledger.HeadMovedError
		if !errors.As(err, &hm) || !errors.Is(err, ledger.ErrHeadMoved) || hm.Expected != want || hm.Actual != got || hm.SessionID != "cas" {
			t.Fatalf("%s: %v, want a HeadMovedError expected %v actual %v", what, err, want, got)
		}
	}
	_, err = s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[1], Expect: none})
	moved("expecting no session", err, *none, *at1)
	// Another writer appends; the head the first writer decided against
	// is gone.
	a1, err := s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[1], Expect: at1})
	if err != nil {
		t.Fatal(err)
	}
	at2 := ledger.Head{Length: 2, Hash: a1.EntryHash}
	_, err = s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[2], Expect: at1})
	moved("stale head", err, *at1, at2)
	_, err = s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[2], Expect: &ledger.Head{Length: 2, Hash: acs.Hash{1}}})
	moved("right length, wrong hash", err, ledger.Head{Length: 2, Hash: acs.Hash{1}}, at2)
	if _, err := s.AppendBatch(ctx, []ledger.Record{
		{SessionID: "cas", Entry: fx[2], Expect: &at2},
		{SessionID: "cas", Entry: fx[3], Expect: &at2},
	}); !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("batch whose second record expects the head before the first: %v", err)
	}
	if se, err := s.Session(ctx, "cas"); err != nil || se.Length != 2 || se.Head != a1.EntryHash {
		t.Fatalf("after refusals: %+v, %v", se, err)
	}
	// A retry of the stored step is a retry, whatever it expected.
	if r, err := s.Append(ctx, ledger.Record{SessionID: "cas", Entry: fx[1], Expect: at1}); err != nil || !r.Replayed || r.EntryHash != a1.EntryHash {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	calls := 0
	sign := func(ledger.Appended) ([]byte, error) { calls++; return []byte(`{}`), nil }
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "cas-g", Entry: fx[0], Expect: &ledger.Head{Length: 1, Hash: a0.EntryHash}}, nil, requestKey("req-cas"), sign)
	if !errors.Is(err, ledger.ErrHeadMoved) || calls != 0 {
		t.Fatalf("AppendRequest expecting a head of a session that does not exist: %v, %d sign calls", err, calls)
	}
	if _, err := s.Session(ctx, "cas-g"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("refused AppendRequest created its session: %v", err)
	}
}
