package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestStepLookupPlan checks that EntriesByStep is one index lookup, as
// SQLite plans it: the lookup without a session searches entries_step_id
// (migration 0004) and takes session_id order from it, with no temporary
// sort, so its LIMIT bounds the rows read; the lookup in one session
// searches an index on both keys.
func TestStepLookupPlan(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.AppendSessions(t, s, "s-%03d", 100, 3)
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := s.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	// The reads of one session's leaves (migration 0018) search the
	// session's tiles by key and each tile's leaves by index.
	// (SCAN t reads the at most limit tiles the CTE found.)
	for name, plan := range map[string]string{
		"LogSessionLeaves":   explain(q.LogSessionLeaves, "s-050", 0, int64(1<<62), 1000),
		"LogLastSessionLeaf": explain(q.LogLastSessionLeaf, "s-050", 200),
	} {
		t.Logf("%s:\n%s", name, plan)
		if !strings.Contains(plan, "SEARCH tlog_session_tiles USING PRIMARY KEY (session_id=? AND tile") ||
			!strings.Contains(plan, "SEARCH l USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") || strings.Contains(plan, "SCAN tlog") || strings.Contains(plan, "SCAN l") {
			t.Errorf("%s is not a search of the session's tiles and their leaves:\n%s", name, plan)
		}
	}
	if plan := explain(q.EntriesByStep, "step-151", ledger.MaxEntriesByStep); plan != "SEARCH entries USING INDEX entries_step_id (step_id=?)" {
		t.Errorf("EntriesByStep is not a bounded search of entries_step_id:\n%s", plan)
	}
	if plan := explain(q.EntryByStep, "s-050", "step-151"); !strings.HasPrefix(plan, "SEARCH entries USING INDEX ") ||
		!strings.Contains(plan, "session_id=?") || !strings.Contains(plan, "step_id=?") || strings.Contains(plan, "\n") {
		t.Errorf("EntryByStep is not one index search on both keys:\n%s", plan)
	}
	es, err := s.EntriesByStep(ctx, "step-151", "")
	if err != nil || len(es) != 1 || es[0].SessionID != "s-050" || es[0].Position != 1 {
		t.Fatalf("step-151: %+v, %v; want session s-050 position 1", es, err)
	}
}
