package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger"
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

// TestSearchTriggerPlans: the search triggers' queries, with the generic
// plans a connection keeps (here made on a new ledger, as every ledger
// once is), probe each row's key in its session's partition, by the key's
// index, rather than join whole partitions: the projection's tool-name
// lookup reads one partition of request_params, and the params trigger's
// update one partition of search_entries. A rewrite of either that joined
// the transition table with whole partitions, as the stored-steps lookup
// once did, fails here, and so do statistics that call a new ledger's
// partitions empty (0011 analyzed them once), under which the plans kept
// were sequential scans of partitions that then grow. With params written
// by a later statement, the update sets the tool name.
func TestSearchTriggerPlans(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	if _, err := s.AppendBatch(ctx, []ledger.Record{{SessionID: "s-1", Entry: storetest.Synthetic(1, "")}}); err != nil {
		t.Fatal(err)
	}
	insertEntry := `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
		SELECT session_id, 1, entry_hash, entry_hash, 'e-probe', 's-probe', step_type, entry_timestamp, now(), content
		FROM entries WHERE session_id = 's-1' AND position = 0 RETURNING session_id, position`
	insertParams := `INSERT INTO request_params (session_id, position, params, recorded_at, tool_name)
		SELECT session_id, position, '\x7b7d', now(), 'read_file' FROM `
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
	plans := triggerPlans(t, url, "WITH e AS ("+insertEntry+") "+insertParams+"e", toolSet)
	project, ok := plans["INSERT INTO search_entries"]
	if !ok {
		t.Fatalf("no plan of the projection among %d", len(plans))
	}
	if read, skipped, byIndex := partitionsRead(project, "request_params"); read != 1 || skipped != 15 || !byIndex || strings.Contains(project, "Hash") {
		t.Errorf("the projection's tool-name lookup read %d partitions of request_params, by index %v (want 1 of 16, by its key's index):\n%s", read, byIndex, project)
	}
	update, ok := plans["UPDATE search_entries se"]
	if !ok {
		t.Fatalf("no plan of the params trigger's update among %d", len(plans))
	}
	if read, skipped, byIndex := partitionsRead(update, "search_entries"); read != 1 || skipped != 15 || !byIndex || strings.Contains(update, "Hash") {
		t.Errorf("the params trigger's update read %d partitions of search_entries, by index %v (want 1 of 16, by its key's index):\n%s", read, byIndex, update)
	}

	// Params written by a later statement, as COPY's path writes them:
	// the projection has no tool name yet, and the update sets it.
	triggerPlans(t, url, insertEntry, insertParams+"entries WHERE session_id = 's-1' AND position = 1", toolSet)
}
