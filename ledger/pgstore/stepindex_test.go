package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestStepLookupPlan checks that EntriesByStep is one index lookup, as
// the planner sees it on an analysed ledger of 400 sessions: the lookup
// without a session reads entries_step_id (migration 0004) in session_id
// order with no sort, so its LIMIT bounds the rows read; the lookup in one
// session finds (session_id, step_id) in an index.
func TestStepLookupPlan(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	s := openStore(t, url, pgstore.Options{})
	var rs []ledger.Record
	for i := range 400 {
		for n := range 3 {
			rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s-%03d", i), Entry: storetest.Synthetic(i*3+n, "")})
		}
	}
	if _, err := s.AppendBatch(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// The writer role may not ANALYZE; the owner may.
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, "ANALYZE entries"); err != nil {
		t.Fatal(err)
	}
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := owner.Query(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	plan := explain(pgstore.QueryEntriesByStep, "step-601", ledger.MaxEntriesByStep)
	if !strings.Contains(plan, "Index Scan using entries_step_id on entries") || !strings.HasPrefix(plan, "Limit") || strings.Contains(plan, "Sort") {
		t.Errorf("EntriesByStep is not a bounded scan of entries_step_id:\n%s", plan)
	}
	plan = explain(pgstore.QueryEntryByStep, "s-200", "step-601")
	// Either index holding both columns serves it (the planner picks
	// either): both keys must be index conditions, not a filter.
	if !strings.HasPrefix(plan, "Index Scan using entries_") || !strings.Contains(plan, "step_id = 'step-601'") ||
		!strings.Contains(plan, "session_id = 's-200'") || strings.Contains(plan, "Filter") {
		t.Errorf("EntryByStep is not one index lookup on both keys:\n%s", plan)
	}
	// And the plan's answer is the entry.
	es, err := s.EntriesByStep(ctx, "step-601", "")
	if err != nil || len(es) != 1 || es[0].SessionID != "s-200" || es[0].Position != 1 {
		t.Fatalf("step-601: %+v, %v; want session s-200 position 1", es, err)
	}
}

// TestStepIndexPrebuilt follows docs/storage.md's procedure for a large
// ledger: the owner builds entries_step_id with CREATE INDEX CONCURRENTLY
// before upgrading, and migration 0004 then finds it and only records its
// version. Without the prebuilt index, Migrate builds it.
func TestStepIndexPrebuilt(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	exec := func(sql string) {
		t.Helper()
		if _, err := owner.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	index := func() string {
		t.Helper()
		var def string
		err := owner.QueryRow(ctx, `SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
			WHERE i.indexrelid = 'entries_step_id'::regclass AND i.indisvalid`).Scan(&def)
		if err != nil {
			t.Fatalf("valid index entries_step_id: %v", err)
		}
		return def
	}
	const want = "CREATE INDEX entries_step_id ON public.entries USING btree (step_id, session_id)"
	if got := index(); got != want {
		t.Fatalf("after Migrate: %s, want %s", got, want)
	}
	// Back to a version 3 database, then each way forward.
	for _, prebuild := range []bool{true, false} {
		exec("DROP INDEX entries_step_id")
		exec("DELETE FROM schema_migrations WHERE version = 4")
		if prebuild {
			exec("CREATE INDEX CONCURRENTLY entries_step_id ON entries (step_id, session_id)")
		}
		if err := pgstore.Migrate(ctx, url); err != nil {
			t.Fatalf("prebuilt %v: %v", prebuild, err)
		}
		var name string
		if err := owner.QueryRow(ctx, "SELECT name FROM schema_migrations WHERE version = 4").Scan(&name); err != nil || name != "0004_step_index.sql" {
			t.Fatalf("prebuilt %v: version 4 recorded as %q, %v", prebuild, name, err)
		}
		if got := index(); got != want {
			t.Fatalf("prebuilt %v: %s, want %s", prebuild, got, want)
		}
	}
}

// BenchmarkStepIndexWriteCost measures what entries_step_id costs appends:
// batches of 1,000 entries over 10 sessions go alternately into a
// database with the index and into one where it was dropped, so both
// figures come from the same moments of a noisy machine.
func BenchmarkStepIndexWriteCost(b *testing.B) {
	ctx := context.Background()
	with := openStore(b, newDB(b), pgstore.Options{})
	url := newDB(b)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "DROP INDEX entries_step_id"); err != nil {
		b.Fatal(err)
	}
	owner.Close(ctx)
	without := openStore(b, url, pgstore.Options{})

	const batch, sessions = 1000, 10
	var n int64
	write := func(s *pgstore.Store) time.Duration {
		rs := make([]ledger.Record, batch)
		for i := range rs {
			rs[i] = ledger.Record{SessionID: fmt.Sprintf("s-%d", i%sessions), Entry: benchEntry(n)}
			n++
		}
		start := time.Now()
		if _, err := s.AppendBatch(ctx, rs); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var dWith, dWithout time.Duration
	for b.Loop() {
		m := n
		dWith += write(with)
		n = m // the same step ids in both databases
		dWithout += write(without)
	}
	rows := float64(b.N * batch)
	b.ReportMetric(rows/dWith.Seconds(), "rows/s-index")
	b.ReportMetric(rows/dWithout.Seconds(), "rows/s-no-index")
	b.ReportMetric(float64(dWith)/float64(dWithout), "x-time")
}
