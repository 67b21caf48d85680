package plan

import (
	"errors"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

func prep(t *testing.T, i int, session, entry string) Prepared {
	t.Helper()
	p, err := Prepare(i, ledger.Record{SessionID: session, Entry: []byte(entry)}, ledger.DefaultMaxEntryBytes)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A record that fails does not advance its session: the next one chains
// onto the last success, and the session moves once, by the successes.
func TestMakeSkipsFailures(t *testing.T) {
	bogus := acs.Hash{7}
	ps := []Prepared{
		prep(t, 0, "s", `{"entry_id":"a","step_id":"1","step_type":"t"}`),
		prep(t, 1, "s", fmt.Sprintf(`{"entry_id":"b","step_id":"2","step_type":"t","previous_hash":%q}`, bogus)),
		prep(t, 2, "s", `{"entry_id":"c","step_id":"3","step_type":"t"}`),
		prep(t, 3, "t", fmt.Sprintf(`{"entry_id":"d","step_id":"1","step_type":"t","entry_hash":%q}`, bogus)),
	}
	p := Make(ps, nil, nil)
	if !errors.Is(p.Errs[1], ledger.ErrHashMismatch) || !errors.Is(p.Errs[3], ledger.ErrHashMismatch) || p.Errs[0] != nil || p.Errs[2] != nil {
		t.Fatalf("errors: %v", p.Errs)
	}
	if len(p.Rows) != 2 || p.Rows[0].Position != 0 || p.Rows[1].Position != 1 {
		t.Fatalf("rows: %+v", p.Rows)
	}
	h0 := acs.EntryHash(ps[0].Entry.Content, nil)
	h2 := acs.EntryHash(ps[2].Entry.Content, &h0)
	if p.Rows[1].EntryHash != h2 || *p.Rows[1].PreviousHash != h0 {
		t.Fatalf("second row does not chain onto the first")
	}
	// Session t had only a failure: it does not move (and is not created).
	if len(p.Moves) != 1 || p.Moves[0].SessionID != "s" || !p.Moves[0].Created || p.Moves[0].ToLength != 2 || p.Moves[0].ToHead != h2 {
		t.Fatalf("moves: %+v", p.Moves)
	}
	if p.Failed() != p.Errs[1] {
		t.Fatalf("Failed() = %v, want the first error", p.Failed())
	}
}

// A failing signer takes its record out and the rest are planned again,
// so the record after it takes its position.
func TestMakeSignerFails(t *testing.T) {
	boom := errors.New("boom")
	calls := map[string]int{}
	signer := func(name string, fail bool) func(ledger.Appended) ([]byte, error) {
		return func(a ledger.Appended) ([]byte, error) {
			calls[name]++
			if fail {
				return nil, boom
			}
			return fmt.Appendf(nil, "%s@%d", name, a.Position), nil
		}
	}
	ps := []Prepared{
		prep(t, 0, "s", `{"entry_id":"a","step_id":"1","step_type":"t"}`),
		prep(t, 1, "s", `{"entry_id":"b","step_id":"2","step_type":"t"}`),
		prep(t, 2, "s", `{"entry_id":"c","step_id":"3","step_type":"t"}`),
	}
	ps[0].Sign, ps[1].Sign, ps[2].Sign = signer("a", false), signer("b", true), signer("c", false)
	p := Make(ps, nil, nil)
	if !errors.Is(p.Errs[1], boom) || p.Errs[0] != nil || p.Errs[2] != nil {
		t.Fatalf("errors: %v", p.Errs)
	}
	if string(p.Signed[0]) != "a@0" || p.Signed[1] != nil || string(p.Signed[2]) != "c@1" {
		t.Fatalf("signed: %q", p.Signed)
	}
	if len(p.Rows) != 2 || p.Rows[1].Entry.EntryID != "c" || p.Rows[1].Position != 1 {
		t.Fatalf("rows: %+v", p.Rows)
	}
	if calls["b"] != 1 {
		t.Fatalf("the failed signer ran %d times, want 1", calls["b"])
	}
}
