package pgstore_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// triggerPlans runs stmts in a transaction it rolls back, on a connection
// of url whose statements run with generic plans (those a connection keeps
// for a trigger's queries after five runs), and returns the plans
// auto_explain gave of the statements nested in them (the triggers'),
// keyed by the first words of each query's text.
func triggerPlans(t *testing.T, url string, stmts ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off", "SET auto_explain.log_level = notice",
		"SET plan_cache_mode = force_generic_plan", "BEGIN"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	plans := map[string]string{}
	for _, n := range notices {
		_, text, ok := strings.Cut(n, "Query Text: ")
		if !ok {
			continue
		}
		words := strings.Fields(text)
		plans[strings.Join(words[:min(3, len(words))], " ")] = n
	}
	return plans
}

// TestSearchProjectionPlans: the search projection's statement (migration
// 0019), with the generic plan a connection keeps (here on a new ledger, as
// every ledger once is), probes each queued entry's key in its session's
// partition of entries and of request_params, by the key's index, rather
// than join whole partitions; and it projects the tool name of params
// written in the entry's statement or a later one (COPY's path), since it
// runs after both committed.
func TestSearchProjectionPlans(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	if _, err := s.AppendBatch(ctx, []ledger.Record{{SessionID: "s-1", Entry: storetest.Synthetic(1, "")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProjectSearch(ctx); err != nil {
		t.Fatal(err)
	}
	insertEntry := `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
		SELECT session_id, 1, entry_hash, entry_hash, 'e-probe', 's-probe', step_type, entry_timestamp, now(), content
		FROM entries WHERE session_id = 's-1' AND position = 0 RETURNING session_id, position`
	insertParams := `INSERT INTO request_params (session_id, position, params, recorded_at, tool_name)
		SELECT session_id, position, '\x7b7d', now(), 'read_file' FROM `
	var project string
	for _, l := range strings.SplitAfter(strings.Replace(pgstore.QueryProjectSearch, "LIMIT $1", "LIMIT 1000", 1), "\n") {
		if !strings.HasPrefix(l, "--") { // the plans are keyed by the query's first words
			project += l
		}
	}
	toolSet := `DO $$ BEGIN
		IF (SELECT tool_name FROM search_entries WHERE session_id = 's-1' AND position = 1) IS DISTINCT FROM 'read_file' THEN
			RAISE EXCEPTION 'the projection of s-1/1 lacks its tool name';
		END IF; END $$`
	// partitionsRead counts the partitions of table the plan scanned
	// (each read by index, or byIndex is false) and those it did not.
	partitionsRead := func(plan, table string) (read, skipped int, byIndex bool) {
		byIndex = true
		for _, l := range strings.Split(plan, "\n") {
			if !strings.Contains(l, "Scan") || !strings.Contains(l, " on "+table+"_p") {
				continue
			}
			if strings.Contains(l, "(never executed)") {
				skipped++
				continue
			}
			read++
			byIndex = byIndex && strings.Contains(l, "Index Scan")
		}
		return read, skipped, byIndex
	}

	// An entry and its params in one statement, as the Guardian's group
	// commit writes them.
	plans := triggerPlans(t, url, "WITH e AS ("+insertEntry+") "+insertParams+"e", project, toolSet)
	plan, ok := plans["WITH q AS"]
	if !ok {
		t.Fatalf("no plan of the projection among %d: %v", len(plans), slices.Collect(maps.Keys(plans)))
	}
	for _, table := range []string{"entries", "request_params"} {
		if read, skipped, byIndex := partitionsRead(plan, table); read != 1 || skipped != 15 || !byIndex {
			t.Errorf("the projection read %d partitions of %s, by index %v (want 1 of 16, by its key's index):\n%s", read, table, byIndex, plan)
		}
	}

	// Params written by a later statement, as COPY's path writes them.
	triggerPlans(t, url, insertEntry, insertParams+"entries WHERE session_id = 's-1' AND position = 1", project, toolSet)
}
