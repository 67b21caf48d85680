package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// fakeStore applies groups in memory: each record gets the next position of
// its session, except records of session "bad", which fail the whole
// transaction, and records whose step_id is "reject", which fail alone.
type fakeStore struct {
	mu     sync.Mutex
	groups [][]string // session/step of every committed group
	length map[string]int64
	delay  time.Duration
}

var errPoison = errors.New("poisoned transaction")

func (f *fakeStore) apply(ctx context.Context, ps []plan.Prepared) (*plan.Plan, error) {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ps {
		if p.SessionID == "bad" {
			return nil, errPoison
		}
	}
	pl := &plan.Plan{Results: make([]ledger.Appended, len(ps)), Errs: make([]error, len(ps))}
	var g []string
	for i, p := range ps {
		if p.Entry.StepID == "reject" {
			pl.Errs[i] = ledger.ErrConflict
			continue
		}
		pl.Results[i] = ledger.Appended{SessionID: p.SessionID, Position: f.length[p.SessionID]}
		f.length[p.SessionID]++
		g = append(g, p.SessionID+"/"+p.Entry.StepID)
	}
	f.groups = append(f.groups, g)
	return pl, nil
}

func record(t testing.TB, session, step string) plan.Prepared {
	p, err := plan.Prepare(0, ledger.Record{SessionID: session,
		Entry: fmt.Appendf(nil, `{"entry_id":"e","step_id":%q,"step_type":"t"}`, step)}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func appendAll(c *Committer, ps []plan.Prepared) ([]ledger.Appended, []error) {
	res, errs := make([]ledger.Appended, len(ps)), make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], _, errs[i] = c.Append(context.Background(), p)
		}()
	}
	wg.Wait()
	return res, errs
}

func TestSharesAndIsolates(t *testing.T) {
	f := &fakeStore{length: map[string]int64{}, delay: 5 * time.Millisecond}
	c := New(f.apply, Options{Queues: 1})
	defer c.Close()
	var ps []plan.Prepared
	for i := range 40 {
		ps = append(ps, record(t, fmt.Sprintf("s%d", i%4), fmt.Sprint(i)))
	}
	ps = append(ps, record(t, "bad", "x"), record(t, "s0", "reject"))
	res, errs := appendAll(c, ps)
	if !errors.Is(errs[40], errPoison) || !errors.Is(errs[41], ledger.ErrConflict) {
		t.Fatalf("bad records: %v, %v", errs[40], errs[41])
	}
	seen := map[string]map[int64]bool{}
	for i, err := range errs[:40] {
		if err != nil {
			t.Fatalf("good record %d: %v", i, err)
		}
		r := res[i]
		if seen[r.SessionID] == nil {
			seen[r.SessionID] = map[int64]bool{}
		}
		if seen[r.SessionID][r.Position] {
			t.Fatalf("%s position %d given twice", r.SessionID, r.Position)
		}
		seen[r.SessionID][r.Position] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.groups) > 15 {
		t.Fatalf("40 good records took %d transactions: groups are not shared", len(f.groups))
	}
}

func TestOrderWithinSession(t *testing.T) {
	f := &fakeStore{length: map[string]int64{}}
	c := New(f.apply, Options{Queues: 3})
	defer c.Close()
	for i := range 20 {
		r, _, err := c.Append(context.Background(), record(t, "s", fmt.Sprint(i)))
		if err != nil || r.Position != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
	}
}

func TestCancelledAndClosed(t *testing.T) {
	f := &fakeStore{length: map[string]int64{}}
	c := New(f.apply, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.Append(ctx, record(t, "s", "1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v", err)
	}
	c.Close()
	c.Close() // twice is fine
	if _, _, err := c.Append(context.Background(), record(t, "s", "2")); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.length["s"] != 0 {
		t.Fatalf("a cancelled or refused append was applied: %v", f.groups)
	}
}

func TestLinger(t *testing.T) {
	f := &fakeStore{length: map[string]int64{}}
	c := New(f.apply, Options{Queues: 1, MaxDelay: 30 * time.Millisecond, MaxBatch: 8})
	defer c.Close()
	var ps []plan.Prepared
	for i := range 16 {
		ps = append(ps, record(t, "s", fmt.Sprint(i)))
	}
	if _, errs := appendAll(c, ps); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if len(g) > 8 {
			t.Fatalf("group of %d over MaxBatch 8", len(g))
		}
	}
}
