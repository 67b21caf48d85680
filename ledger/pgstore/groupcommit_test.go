package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// appendAll runs one Append per record concurrently and returns the
// outcomes in record order.
func appendAll(s ledger.Store, rs []ledger.Record) ([]ledger.Appended, []error) {
	res := make([]ledger.Appended, len(rs))
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = s.Append(context.Background(), r)
		}()
	}
	wg.Wait()
	return res, errs
}

func TestGroupCommitShares(t *testing.T) {
	s := openStore(t, newDB(t), pgstore.Options{Committers: 1, MaxDelay: 20 * time.Millisecond})
	const n = 64
	var rs []ledger.Record
	for i := range n {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s%d", i%5), Entry: storetest.Synthetic(i, "")})
	}
	before := s.Commits()
	_, errs := appendAll(s, rs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	commits := s.Commits() - before
	t.Logf("%d appends in %d commits", n, commits)
	if commits >= n/2 {
		t.Fatalf("%d concurrent appends took %d commits: not sharing", n, commits)
	}
	total := int64(0)
	for i := range 5 {
		se, err := s.Session(context.Background(), fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		total += se.Length
	}
	if total != n {
		t.Fatalf("%d entries stored, want %d", total, n)
	}
}

// TestGroupCommitIsolatesFailures puts good and bad appends into the same
// group commits: the bad ones get their own errors, the good ones commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openStore(t, newDB(t), pgstore.Options{Committers: 1, MaxDelay: 50 * time.Millisecond})
	ctx := context.Background()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "old", Entry: storetest.Synthetic(0, "")}); err != nil {
		t.Fatal(err)
	}
	poison := errors.New("injected database failure")
	s.FailWritesOf("poisoned", poison)
	bogus := acs.Hash{9}
	rs := []ledger.Record{
		{SessionID: "poisoned", Entry: storetest.Synthetic(1, "")},
		{SessionID: "old", Entry: storetest.Synthetic(0, "changed")},                                                                    // conflict
		{SessionID: "mismatch", Entry: []byte(fmt.Sprintf(`{"entry_id":"e","step_id":"x","step_type":"t","previous_hash":%q}`, bogus))}, // previous_hash on a first entry
	}
	for i := range 20 {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("good%d", i%4), Entry: storetest.Synthetic(100+i, "")})
	}
	before := s.Commits()
	_, errs := appendAll(s, rs)
	if !errors.Is(errs[0], poison) {
		t.Errorf("poisoned append: got %v, want the injected failure", errs[0])
	}
	if !errors.Is(errs[1], ledger.ErrConflict) {
		t.Errorf("conflicting append: got %v, want ErrConflict", errs[1])
	}
	if !errors.Is(errs[2], ledger.ErrHashMismatch) {
		t.Errorf("mismatched append: got %v, want ErrHashMismatch", errs[2])
	}
	for i, err := range errs[3:] {
		if err != nil {
			t.Errorf("good append %d failed beside bad ones: %v", i, err)
		}
	}
	// Bisection isolates the poisoned entry in a few extra transactions;
	// one transaction per entry would be 20.
	if c := s.Commits() - before; c > 12 {
		t.Errorf("%d commits for 20 good appends: the failure was not isolated by bisection", c)
	}
	for _, id := range []string{"poisoned", "mismatch"} {
		if _, err := s.Session(ctx, id); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("session %s exists after its only append failed: %v", id, err)
		}
	}
	n := int64(0)
	for i := range 4 {
		se, err := s.Session(ctx, fmt.Sprintf("good%d", i))
		if err != nil {
			t.Fatal(err)
		}
		n += se.Length
	}
	if n != 20 {
		t.Fatalf("%d good entries stored, want 20", n)
	}
}

func TestAppendAfterClose(t *testing.T) {
	s, err := pgstore.Open(context.Background(), newDB(t), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Append(context.Background(), ledger.Record{SessionID: "s", Entry: storetest.Synthetic(1, "")}); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
}

func TestAppendCancelled(t *testing.T) {
	s := openStore(t, newDB(t), pgstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: storetest.Synthetic(1, "")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v", err)
	}
}

// TestTwoStoresOneSession runs two stores on one database, as two
// processes would, appending to the same sessions through group commit and
// AppendBatch at once: the compare-and-swap and the unique keys must make
// the losers replan, never fork.
func TestTwoStoresOneSession(t *testing.T) {
	url := newDB(t)
	stores := []*pgstore.Store{openStore(t, url, pgstore.Options{}), openStore(t, url, pgstore.Options{Committers: 3})}
	ctx := context.Background()
	const workers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var acked sync.Map // "session/position" -> entry hash
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := range each {
				id := fmt.Sprintf("s%d", i%2)
				var res []ledger.Appended
				var err error
				if w%3 == 0 {
					res, err = s.AppendBatch(ctx, []ledger.Record{
						{SessionID: id, Entry: storetest.Synthetic(w*1000+i*2, "")},
						{SessionID: "s-other", Entry: storetest.Synthetic(w*1000+i*2+1, "")},
					})
				} else {
					var r ledger.Appended
					r, err = s.Append(ctx, ledger.Record{SessionID: id, Entry: storetest.Synthetic(w*1000+i*2, "")})
					res = []ledger.Appended{r}
				}
				if err != nil {
					errs <- err
					return
				}
				for _, r := range res {
					if prev, dup := acked.LoadOrStore(fmt.Sprintf("%s/%d", r.SessionID, r.Position), r.EntryHash); dup {
						errs <- fmt.Errorf("%s position %d acknowledged twice (%s and %s)", r.SessionID, r.Position, prev, r.EntryHash)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := int64(0)
	for _, id := range []string{"s0", "s1", "s-other"} {
		es, err := stores[0].Entries(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var prev *acs.Hash
		for _, e := range es {
			if !samePtr(e.PreviousHash, prev) || acs.EntryHash(e.Content, prev) != e.EntryHash {
				t.Fatalf("%s position %d does not chain", id, e.Position)
			}
			if h, ok := acked.Load(fmt.Sprintf("%s/%d", id, e.Position)); !ok || h.(acs.Hash) != e.EntryHash {
				t.Fatalf("%s position %d: stored %s, acknowledged %v", id, e.Position, e.EntryHash, h)
			}
			h := e.EntryHash
			prev = &h
		}
		total += int64(len(es))
	}
	// The test is only worth something if the stores did collide.
	if r := stores[0].Replans() + stores[1].Replans(); r == 0 {
		t.Error("no transaction was replanned: the stores never raced")
	}
	if want := int64(workers*each + 2*each); total != want {
		t.Fatalf("%d entries stored, want %d", total, want)
	}
}

func samePtr(a, b *acs.Hash) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
