package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// testEraseParams: an erasure deletes one step's params and records why
// and when, is refused a second time and where nothing is stored, writes
// nothing when refused, and leaves every entry, response and the chain
// byte for byte as they were.
func testEraseParams(t *testing.T, s ledger.GuardianStore, clock *Clock) {
	ctx := context.Background()
	sign := func(a ledger.Appended) ([]byte, error) {
		return fmt.Appendf(nil, `{"result":{"chain_hash":%q,"position":%d}}`, a.EntryHash, a.Position), nil
	}
	params := func(i int) []byte { return fmt.Appendf(nil, `{"payload":{"text":"secret %d"}}`, i) }
	fx := Fixtures(t)
	for i := range 3 {
		if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: fx[i]}, params(i), requestKey(fmt.Sprintf("r-%d", i)), sign); err != nil {
			t.Fatal(err)
		}
	}
	// Position 3 has a response but no params; "other" is another session.
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[3]}, nil, requestKey("r-3"), sign); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "other", AgentID: "a", Entry: fx[0]}, params(0), requestKey("r-0"), sign); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, s)
	responses := func() [][]byte {
		t.Helper()
		var rs [][]byte
		for pos := range int64(4) {
			b, err := s.Response(ctx, "s", pos)
			if err != nil {
				t.Fatalf("response at %d: %v", pos, err)
			}
			rs = append(rs, b)
		}
		return rs
	}
	respBefore := responses()
	chainBefore := verifyChain(t, s, "s")

	clock.Advance(time.Hour)
	const reason, by = "data subject request #42 (GDPR Art. 17)", "dpo@example.org"
	e, err := s.EraseParams(ctx, "s", 1, reason, by)
	if err != nil {
		t.Fatal(err)
	}
	first := ledger.Erasure{SessionID: "s", Position: 1, ErasedAt: clock.Now(), Reason: reason, ErasedBy: by}
	if !e.ErasedAt.Equal(first.ErasedAt) || e.ErasedAt.Location() != time.UTC || e.SessionID != "s" || e.Position != 1 || e.Reason != reason || e.ErasedBy != by {
		t.Fatalf("EraseParams returned %+v, want %+v", e, first)
	}
	wantErased := func(pos int64, want ledger.Erasure) {
		t.Helper()
		b, err := s.Request(ctx, "s", pos)
		var ee *ledger.ErasedError
		if !errors.As(err, &ee) || !errors.Is(err, ledger.ErrErased) || errors.Is(err, ledger.ErrNotFound) || b != nil {
			t.Fatalf("Request of erased params at %d: %q, %v; want an *ErasedError only", pos, b, err)
		}
		got := ee.Erasure
		if got.SessionID != want.SessionID || got.Position != want.Position || !got.ErasedAt.Equal(want.ErasedAt) ||
			got.ErasedAt.Location() != time.UTC || got.Reason != want.Reason || got.ErasedBy != want.ErasedBy {
			t.Fatalf("erasure read back: %+v, want %+v", got, want)
		}
		for _, part := range []string{want.Reason, want.ErasedAt.Format(time.RFC3339Nano), "erased"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not say %q", err, part)
			}
		}
	}
	wantErased(1, first)
	wantParams := func(session string, pos int64, i int) {
		t.Helper()
		if b, err := s.Request(ctx, session, pos); err != nil || string(b) != string(params(i)) {
			t.Fatalf("params of %s at %d: %q, %v; want %q", session, pos, b, err, params(i))
		}
	}
	wantParams("s", 0, 0)
	wantParams("s", 2, 2)
	wantParams("other", 0, 0)

	// A second erasure is refused, names the first and changes nothing.
	clock.Advance(time.Hour)
	_, err = s.EraseParams(ctx, "s", 1, "again", "someone else")
	var ee *ledger.ErasedError
	if !errors.As(err, &ee) || !ee.Erasure.ErasedAt.Equal(first.ErasedAt) || ee.Erasure.Reason != reason || !strings.Contains(err.Error(), reason) {
		t.Fatalf("second erasure: %v; want an *ErasedError naming the first", err)
	}
	wantErased(1, first)

	// No params: never stored (position 3), past the end, another
	// session, an unknown session. Nothing is recorded for them.
	for _, c := range []struct {
		session string
		pos     int64
	}{{"s", 3}, {"s", 4}, {"other", 1}, {"none", 0}} {
		_, err := s.EraseParams(ctx, c.session, c.pos, reason, by)
		if !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrErased) {
			t.Errorf("erase %s at %d (no params): %v, want ErrNotFound", c.session, c.pos, err)
		}
		if _, err := s.Request(ctx, c.session, c.pos); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("params of %s at %d after a refused erasure: %v, want ErrNotFound (no erasure recorded)", c.session, c.pos, err)
		}
	}

	// Malformed requests are refused before anything is written.
	for _, c := range []struct {
		name, session string
		pos           int64
		reason, by    string
		want          string
	}{
		{"empty reason", "s", 2, "", by, "reason must not be blank"},
		{"blank reason", "s", 2, " \t\n", by, "reason must not be blank"},
		{"negative position", "s", -1, reason, by, "negative position"},
		{"empty session", "", 0, reason, by, "empty session id"},
		{"reason not UTF-8", "s", 2, "bad \xff", by, "reason is not valid UTF-8"},
		{"erased_by not UTF-8", "s", 2, reason, "\xfe", "erased_by is not valid UTF-8"},
		{"reason too long", "s", 2, strings.Repeat("x", ledger.MaxErasureText+1), by, "more than 4096"},
	} {
		_, err := s.EraseParams(ctx, c.session, c.pos, c.reason, c.by)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrErased) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	wantParams("s", 2, 2)

	// A retry of the erased step's append is a replay and does not bring
	// its params back.
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", Entry: fx[1]}, params(1), requestKey("r-1-retry"), sign); !errors.Is(err, ledger.ErrReplay) {
		t.Fatalf("retry of the erased step: %v, want ErrReplay", err)
	}
	wantErased(1, first)

	// Erasing with no by is allowed; the two erasures are independent.
	e2, err := s.EraseParams(ctx, "s", 0, "retention period over", "")
	if err != nil || e2.ErasedBy != "" || !e2.ErasedAt.Equal(clock.Now()) {
		t.Fatalf("erase without by: %+v, %v", e2, err)
	}
	wantErased(0, ledger.Erasure{SessionID: "s", Position: 0, ErasedAt: clock.Now(), Reason: "retention period over"})
	wantErased(1, first)
	wantParams("other", 0, 0)

	// The point: entries, responses and the chain are byte for byte what
	// they were.
	assertUnchanged(t, s, before)
	chainAfter := verifyChain(t, s, "s")
	for i := range chainBefore {
		b, a := chainBefore[i], chainAfter[i]
		if string(b.Content) != string(a.Content) || b.EntryHash != a.EntryHash || !sameHash(b.PreviousHash, a.PreviousHash) {
			t.Fatalf("entry %d changed by the erasure", i)
		}
	}
	for i, r := range responses() {
		if string(r) != string(respBefore[i]) {
			t.Fatalf("response %d changed by the erasure: %q became %q", i, respBefore[i], r)
		}
	}
}

// testEraseParamsConcurrent: of concurrent erasures of the same params one
// wins; the others are told it was erased and record nothing.
func testEraseParamsConcurrent(t *testing.T, s ledger.GuardianStore, _ *Clock) {
	ctx := context.Background()
	if _, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: Synthetic(0, "")}, []byte(`{"p":0}`), requestKey("r-0"),
		func(ledger.Appended) ([]byte, error) { return []byte("{}"), nil }); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.EraseParams(ctx, "s", 0, fmt.Sprintf("erasure %d", i), "") })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won == -1:
			won = i
		case err == nil:
			t.Fatalf("erasures %d and %d both succeeded", won, i)
		case !errors.Is(err, ledger.ErrErased):
			t.Fatalf("erasure %d: %v, want ErrErased", i, err)
		}
	}
	if won == -1 {
		t.Fatal("no erasure succeeded")
	}
	var ee *ledger.ErasedError
	if _, err := s.Request(ctx, "s", 0); !errors.As(err, &ee) || ee.Erasure.Reason != fmt.Sprintf("erasure %d", won) {
		t.Fatalf("Request after the race: %v; want the erasure of %d", err, won)
	}
}
