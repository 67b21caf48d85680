package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestStepLookupPlan checks that EntriesByStep is one index lookup, as
// the planner sees it on an analysed ledger of 4,000 sessions: the lookup
// without a session reads entries_step_id (migration 0004) of each of the
// 16 partitions (0011) in session_id order, merged with no sort, so its
// LIMIT bounds the rows read; the lookup in one session reads one
// partition and finds (session_id, step_id) in an index. (Ten times the
// sessions of the unpartitioned test: on partitions of a few pages a
// sequential scan is the planner's right choice.)
func TestStepLookupPlan(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	storetest.AppendSessions(t, s, "s-%04d", 4000, 3)
	// The writer role may not ANALYZE; the owner may.
	owner := ownerConn(t, url)
	if _, err := owner.Exec(ctx, "ANALYZE entries"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, owner, pgstore.QueryEntriesByStep, "step-601", ledger.MaxEntriesByStep)
	stepScans := regexp.MustCompile(`Index Scan using entries_p\d\d_step_id_session_id_idx on entries_p\d\d`).FindAllString(plan, -1)
	if len(stepScans) != 16 || !strings.HasPrefix(plan, "Limit") || !strings.Contains(plan, "Merge Append") || strings.Contains(plan, "Sort  (") {
		t.Errorf("EntriesByStep is not a bounded merge of entries_step_id's 16 partitions:\n%s", plan)
	}
	plan = explain(t, owner, pgstore.QueryEntryByStep, "s-2000", "step-6001")
	// Either index holding both columns serves it (the planner picks
	// either): both keys must be index conditions, not a filter, in one
	// partition.
	if !strings.HasPrefix(plan, "Index Scan using entries_p") || !strings.Contains(plan, "step_id = 'step-6001'") ||
		!strings.Contains(plan, "session_id = 's-2000'") || strings.Contains(plan, "Filter") || strings.Contains(plan, "Append") {
		t.Errorf("EntryByStep is not one index lookup on both keys in one partition:\n%s", plan)
	}
	// And the plan's answer is the entry.
	es, err := s.EntriesByStep(ctx, "step-6001", "")
	if err != nil || len(es) != 1 || es[0].SessionID != "s-2000" || es[0].Position != 1 {
		t.Fatalf("step-6001: %+v, %v; want session s-2000 position 1", es, err)
	}
}

// TestStepIndexPrebuilt follows docs/storage.md's procedure for a large
// ledger at version 3: the owner builds entries_step_id with CREATE INDEX
// CONCURRENTLY before upgrading, and migration 0004 then finds it and only
// records its version. Without the prebuilt index, Migrate builds it.
// Either way migration 0011 then rebuilds it on the partitioned entries.
func TestStepIndexPrebuilt(t *testing.T) {
	ctx := context.Background()
	for _, prebuild := range []bool{true, false} {
		url := newDBAt(t, 3)
		owner, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer owner.Close(ctx)
		if prebuild {
			if _, err := owner.Exec(ctx, "CREATE INDEX CONCURRENTLY entries_step_id ON entries (step_id, session_id)"); err != nil {
				t.Fatal(err)
			}
		}
		if err := pgstore.Migrate(ctx, url); err != nil {
			t.Fatalf("prebuilt %v: %v", prebuild, err)
		}
		var name string
		if err := owner.QueryRow(ctx, "SELECT name FROM schema_migrations WHERE version = 4").Scan(&name); err != nil || name != "0004_step_index.sql" {
			t.Fatalf("prebuilt %v: version 4 recorded as %q, %v", prebuild, name, err)
		}
		var def string
		err = owner.QueryRow(ctx, `SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
			WHERE i.indexrelid = 'entries_step_id'::regclass AND i.indisvalid`).Scan(&def)
		if err != nil {
			t.Fatalf("prebuilt %v: valid index entries_step_id: %v", prebuild, err)
		}
		// ON ONLY: the index of a partitioned table, each partition
		// holding its own.
		if want := "CREATE INDEX entries_step_id ON ONLY public.entries USING btree (step_id, session_id)"; def != want {
			t.Fatalf("prebuilt %v: %s, want %s", prebuild, def, want)
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
