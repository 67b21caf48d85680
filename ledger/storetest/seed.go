package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// Helpers for a driver's own tests (append-only enforcement, erasure,
// params at rest), which reach past the store into its database.

// SeedSession appends the first n fixtures to session "s" of agent "a" as
// Guardian requests "r-0", "r-1", ..., each with params(i) and a response
// holding its entry hash, and returns the session.
func SeedSession(t testing.TB, s Roles, n int, params func(i int) []byte) ledger.Session {
	t.Helper()
	ctx := context.Background()
	for i, f := range Fixtures(t)[:n] {
		_, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: f}, params(i), ledger.Seen{RequestID: fmt.Sprintf("r-%d", i), At: time.Now()},
			func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
		if err != nil {
			t.Fatalf("fixture %d: %v", i, err)
		}
	}
	se, err := s.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	return se
}

// SeedEvidence puts a row in every evidence table: the four fixtures in
// session "s" (SeedSession, params {"payload":{}}), the request "req-1"
// with nonce "n-1" and the policy bundle p@1. It returns the session, for
// CheckEvidence.
func SeedEvidence(t testing.TB, s Roles) ledger.Session {
	t.Helper()
	ctx := context.Background()
	before := SeedSession(t, s, 4, func(int) []byte { return []byte(`{"payload":{}}`) })
	if err := s.RecordRequest(ctx, "s", "req-1", "n-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPolicyBundle(ctx, ledger.PolicyBundle{ID: "p", Version: "1",
		Digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Content: []byte{}}); err != nil {
		t.Fatal(err)
	}
	return before
}

// CheckEvidence fails t unless what SeedEvidence stored is as it was: the
// session (before), its entries, the last response and the replay history.
func CheckEvidence(t testing.TB, s Roles, before ledger.Session) {
	t.Helper()
	ctx := context.Background()
	after, err := s.Session(ctx, "s")
	if err != nil || after != before {
		t.Fatalf("session changed: %+v became %+v (%v)", before, after, err)
	}
	es, err := s.Entries(ctx, "s", 0, 100)
	if err != nil || len(es) != 4 || es[3].EntryHash != before.Head || es[2].StepType != "protocols/MCP/tools/call" {
		t.Fatalf("entries after the attempts: %+v, %v", es, err)
	}
	if b, err := s.Response(ctx, "s", 3); err != nil || string(b) != before.Head.String() {
		t.Fatalf("response after the attempts: %q, %v", b, err)
	}
	if err := s.RecordRequest(ctx, "s", "req-1", "", time.Now()); !errors.Is(err, ledger.ErrReplay) {
		t.Fatalf("replay history lost: %v", err)
	}
}

// AppendSessions appends, in one batch, per synthetic entries to each of
// sessions sessions, named by format from the session's number: entry n
// of session i is Synthetic(i*per+n, "").
func AppendSessions(t testing.TB, s ledger.Store, format string, sessions, per int) {
	t.Helper()
	rs := make([]ledger.Record, 0, sessions*per)
	for i := range sessions {
		for n := range per {
			rs = append(rs, ledger.Record{SessionID: fmt.Sprintf(format, i), Entry: Synthetic(i*per+n, "")})
		}
	}
	if _, err := s.AppendBatch(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
}

// CheckErasedByHand fails t unless the params of session "s" position 1,
// which the test erased past the store (recording an erasure with reason
// "test" and deleting the row), read as erased, and the session is still
// before.
func CheckErasedByHand(t testing.TB, s Roles, before ledger.Session) {
	t.Helper()
	ctx := context.Background()
	var ee *ledger.ErasedError
	if _, err := s.Request(ctx, "s", 1); !errors.As(err, &ee) || ee.Erasure.Reason != "test" {
		t.Fatalf("Request of the erased row: %v", err)
	}
	after, err := s.Session(ctx, "s")
	if err != nil || after != before {
		t.Fatalf("session changed: %+v became %+v (%v)", before, after, err)
	}
}
