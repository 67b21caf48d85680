package ingest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
)

// oneWriter hides a store's ParallelWriters: the Runner then writes each
// batch in one transaction.
type oneWriter struct{ ingest.Store }

// TestParallelIngestMatchesOne: a Runner over a store that takes parallel
// writers (pgstore) splits a batch by session, and gives every record the
// outcome one transaction per batch gives, in input order: the same
// statuses, positions and entry hashes, the same heads. A batch in which
// one natural key appears in two sessions is written whole, so the first
// record in input order is the accepted one, as without the split.
func TestParallelIngestMatchesOne(t *testing.T) {
	ctx := context.Background()
	open := func() *pgstore.Store {
		url := pgtest.NewDatabase(t)
		if err := pgstore.Migrate(ctx, url); err != nil {
			t.Fatal(err)
		}
		s, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	split, whole := open(), open()

	// Batch 1: 600 decisions in 64 sessions, and a redelivery of some. Batch
	// 2: the key of record 0 again, in another session with other content
	// (a key conflict), before new decisions.
	raws := benchRaws("p", 600)
	raws = append(raws, raws[10:30]...)
	conflict := benchEvent("p", 0)
	conflict = []byte(string(conflict[:len(conflict)-1]) + `,"extra":1}`)
	second := []ingest.Raw{{File: "bench", Record: 621, Bytes: conflict}}
	second = append(second, benchRaws("q", 300)...)
	// Keys of this batch again, each in the next session: some pair falls
	// in two shares.
	for n := 1; n <= 8; n++ {
		e := strings.Replace(string(benchEvent("q", n)), fmt.Sprintf(`"q-s%02d"`, n), fmt.Sprintf(`"q-s%02d"`, n+1), 1)
		second = append(second, ingest.Raw{File: "bench", Record: int64(len(second) + 621), Bytes: []byte(e)})
	}

	type outcome struct {
		status            ledger.IngestStatus
		key, reason       string
		session           string
		position          int64
		hash              string
		commitsOfTheBatch int64
	}
	run := func(st ingest.Store, commits func() int64, raws []ingest.Raw) []outcome {
		var out []outcome
		before := commits()
		r := ingest.Runner{Store: st, Batch: 1000, OnResult: func(_ ledger.IngestRecord, res ledger.IngestResult) {
			out = append(out, outcome{status: res.Status, key: res.Key, reason: res.Reason, session: res.SessionID,
				position: res.Position, hash: res.EntryHash.String()})
		}}
		if _, err := r.Run(ctx, ingest.OPAMapper{}, seq(raws)); err != nil {
			t.Fatal(err)
		}
		out[0].commitsOfTheBatch = commits() - before
		return out
	}
	for b, in := range [][]ingest.Raw{raws, second} {
		got := run(split, split.Commits, in)
		want := run(oneWriter{whole}, whole.Commits, in)
		if len(got) != len(in) || len(want) != len(in) {
			t.Fatalf("batch %d: %d and %d results for %d records", b, len(got), len(want), len(in))
		}
		splitCommits, wholeCommits := got[0].commitsOfTheBatch, want[0].commitsOfTheBatch
		got[0].commitsOfTheBatch, want[0].commitsOfTheBatch = 0, 0
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("batch %d, record %d: split %+v, whole %+v", b, i, got[i], want[i])
			}
		}
		if b == 1 && (got[0].status != ledger.IngestQuarantined || got[0].reason != ledger.ReasonKeyConflict ||
			got[1].status != ledger.IngestAccepted || got[len(got)-1].status != ledger.IngestQuarantined || got[len(got)-1].reason != ledger.ReasonKeyConflict) {
			t.Errorf("the conflicting records: %+v, %+v, %+v", got[0], got[1], got[len(got)-1])
		}
		// Batch 1 went in as two transactions, batch 2 (a key in two
		// sessions) as one.
		if wantSplit := []int64{2, 1}[b]; splitCommits != wantSplit || wholeCommits != 1 {
			t.Errorf("batch %d: %d commits split, %d whole (want %d, 1)", b, splitCommits, wholeCommits, wantSplit)
		}
	}
	// The outcomes themselves: 600 accepted then 20 duplicates; the
	// conflicting record quarantined.
	var accepted, dups int
	res := run(split, split.Commits, raws[590:])
	for _, o := range res {
		switch o.status {
		case ledger.IngestAccepted:
			accepted++
		case ledger.IngestDuplicate:
			dups++
		}
	}
	if accepted != 0 || dups != len(raws)-590 {
		t.Errorf("a third delivery: %d accepted, %d duplicates of %d", accepted, dups, len(raws)-590)
	}
	for i := range 64 {
		id := fmt.Sprintf("p-s%02d", i)
		a, err := split.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := whole.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Length != b.Length || a.Head != b.Head || a.Length == 0 {
			t.Errorf("session %s: split %d %s, whole %d %s", id, a.Length, a.Head, b.Length, b.Head)
		}
	}
}
