package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
)

// TestSearchPartialIndexes: the GIN indexes of the search projection hold
// only non-empty arrays and texts (migration 0013), and a search by a
// reason code, a policy, a flag or a phrase still reads them: the filters
// say the column is not empty, which the planner needs to pick a partial
// index. The hits are the few entries that have the value.
//
// search_entries is partitioned (migration 0011): its indexes are the
// partitions' (search_entries_pNN_<column>_idx), and a partition of a few
// hundred rows is rightly read whole. So the plan is asked for with
// sequential scans off: a partial index the filter does not imply cannot
// be used even then, and the plan falls back to a sequential scan.
func TestSearchPartialIndexes(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	var rs []ledger.Record
	for i := range 3000 {
		decision := `{"disposition":"allow"}`
		flags := ""
		if i%1000 == 7 {
			decision = `{"disposition":"deny","reason_codes":["rc.rare"],"policy_references":[{"policy_id":"pol","policy_version":"2"}],"reasoning":"a rare phrase"}`
			flags = `,"flags":["fail_open"]`
		}
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s-%02d", i%50), Entry: fmt.Appendf(nil,
			`{"entry_id":"e-%d","step_id":"st-%d","step_type":"steps/toolCallRequest","timestamp":"2026-12-01T10:00:00Z","decision":%s%s}`,
			i, i, decision, flags)})
	}
	if _, err := s.AppendBatch(ctx, rs); err != nil {
		t.Fatal(err)
	}
	owner := ownerConn(t, url)
	if _, err := owner.Exec(ctx, "ANALYZE search_entries"); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var trgm bool
	if err := owner.QueryRow(ctx, "SELECT to_regclass('search_entries_reasoning') IS NOT NULL").Scan(&trgm); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		index string
		f     ledger.SearchFilter
	}{
		{"search_entries_reason_codes", ledger.SearchFilter{ReasonCode: "rc.rare"}},
		{"search_entries_policy_refs", ledger.SearchFilter{PolicyID: "pol", PolicyVersion: "2"}},
		{"search_entries_flags", ledger.SearchFilter{Flag: "fail_open"}},
		{"search_entries_reasoning", ledger.SearchFilter{Text: "RARE PHRASE"}},
	} {
		if c.index == "search_entries_reasoning" && !trgm {
			t.Log("no pg_trgm: the reasoning text has no index to use")
			continue
		}
		query, args := pgstore.SearchQuery(c.f)
		plan := explain(t, owner, query, args...)
		column := strings.TrimPrefix(c.index, "search_entries_")
		uses := regexp.MustCompile(`Index Scan on (` + c.index + `|search_entries_p\d\d_` + column + `_idx)\b`)
		if !uses.MatchString(plan) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%+v does not read %s (or a partition's) alone:\n%s", c.f, c.index, plan)
		}
		page, err := s.SearchEntries(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Hits) != 3 {
			t.Errorf("%+v: %d hits, want 3", c.f, len(page.Hits))
		}
		for _, h := range page.Hits {
			if h.Disposition != "deny" {
				t.Errorf("%+v: hit %+v", c.f, h)
			}
		}
	}
}
