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
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/migrations"
)

// ownerConn connects to url as the owner role, which may ANALYZE and set
// the planner's options (the writer role may not); closed at t's end.
func ownerConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// explain returns the lines of "EXPLAIN"+query on c, joined: query may
// start with EXPLAIN's options, e.g. " (COSTS OFF) SELECT ...".
func explain(t *testing.T, c *pgx.Conn, query string, args ...any) string {
	t.Helper()
	rows, err := c.Query(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// newDBAt returns the URL of a fresh database migrated up to version, with
// Migrate's bookkeeping, so that a later Migrate applies the rest as it
// would on a ledger that stopped there.
func newDBAt(t testing.TB, version int) string {
	t.Helper()
	ctx := context.Background()
	url := newDBRaw(t)
	ms, err := migrations.Postgres()
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > version {
			break
		}
		if _, err := c.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := c.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// v10Ledger is a version-10 ledger written by hand, as the owner: 40
// sessions of 3 entries each, every side table holding rows, one params
// row erased, the Merkle log's queue filled by its trigger, and an
// identity value allocated and rolled back.
const v10Ledger = `
INSERT INTO sessions (session_id, agent_id, writer, created_at)
SELECT 's-' || i, 'agent-' || i % 3, 'guardian', now() FROM generate_series(1, 40) i;
INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type,
    entry_timestamp, recorded_at, content)
SELECT 's-' || i, p, sha256(convert_to('e' || i || '-' || p, 'UTF8')),
    CASE WHEN p > 0 THEN sha256(convert_to('e' || i || '-' || (p - 1), 'UTF8')) END,
    'e-' || i || '-' || p, 'step-' || i || '-' || p, 'steps/toolCallRequest',
    '2026-03-14T14:02:00.000Z', now() - (i || ' minutes')::interval,
    convert_to(format('{"decision":{"disposition":"%s","reason_codes":["r%s"]},"step_id":"step-%s-%s"}',
        CASE WHEN p % 2 = 0 THEN 'allow' ELSE 'deny' END, p, i, p), 'UTF8')
FROM generate_series(1, 40) i, generate_series(0, 2) p ORDER BY i, p;
INSERT INTO heads (session_id, length, head, updated_at)
SELECT 's-' || i, 3, sha256(convert_to('e' || i || '-2', 'UTF8')), now() FROM generate_series(1, 40) i;
INSERT INTO responses (session_id, position, response, recorded_at)
SELECT session_id, position, convert_to('signed ' || entry_id, 'UTF8'), recorded_at FROM entries;
INSERT INTO request_params (session_id, position, params, recorded_at, tool_name)
SELECT session_id, position, convert_to('{"payload":{"tool":{"name":"bash"}}}', 'UTF8'), recorded_at, 'bash' FROM entries;
INSERT INTO requests (session_id, request_id, nonce, seen_at)
SELECT 's-' || i, 'r-' || i, CASE WHEN i % 2 = 0 THEN 'n-' || i ELSE '' END, now() FROM generate_series(1, 40) i;
INSERT INTO erasures (session_id, position, erased_at, reason, erased_by) VALUES ('s-1', 0, now(), 'test', 'owner');
DELETE FROM request_params WHERE session_id = 's-1' AND position = 0;
`

// TestPartitionMigration converts a version-10 ledger and checks that
// migration 0011 moved every row unchanged into partitioned tables, kept
// the Merkle log's queue, and left a schema the store appends to: ids
// continue past the old ones, the new entry is queued for the log and
// projected for search, and a replayed request is still refused.
func TestPartitionMigration(t *testing.T) {
	ctx := context.Background()
	url := newDBAt(t, 10)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, v10Ledger); err != nil {
		t.Fatal(err)
	}
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO entries (session_id, position, entry_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content) VALUES ('s-1', 99, sha256(''), 'x', 'x', 'x', 'x', now(), '{}')"); err == nil {
		t.Fatal("an entry at position 99 with no previous_hash was accepted")
	}
	tx.Rollback(ctx)

	// Every table's rows as text, in a fixed order.
	tables := map[string]string{
		"entries":        "SELECT t::text FROM entries t",
		"responses":      "SELECT t::text FROM responses t",
		"request_params": "SELECT t::text FROM request_params t",
		"requests":       "SELECT t::text FROM requests t",
		// The columns 0011 moved (0016 adds run_id, NULL for these).
		"erasures":       "SELECT (session_id, position, erased_at, reason, erased_by)::text FROM erasures t",
		"search_entries": "SELECT t::text FROM search_entries t",
		"tlog_pending":   "SELECT entry_id::text FROM tlog_pending",
	}
	snapshot := func() map[string]string {
		t.Helper()
		m := make(map[string]string)
		for name, q := range tables {
			var s string
			if err := owner.QueryRow(ctx, "SELECT coalesce(string_agg(r, E'\\n' ORDER BY r), '') FROM ("+q+") x (r)").Scan(&s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m[name] = s
		}
		return m
	}
	before := snapshot()
	var lastID int64
	if err := owner.QueryRow(ctx, "SELECT last_value FROM entries_id_seq").Scan(&lastID); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(before["entries"], "\n") + 1; n != 120 || strings.Count(before["request_params"], "\n")+1 != 119 ||
		strings.Count(before["tlog_pending"], "\n")+1 != 120 || strings.Count(before["search_entries"], "bash") != 120 {
		// (Erasing params leaves the tool name in the projection.)
		t.Fatalf("the version-10 ledger is not as written: %d entries, %d params, %d queued, %d projected with their tool", n,
			strings.Count(before["request_params"], "\n")+1, strings.Count(before["tlog_pending"], "\n")+1, strings.Count(before["search_entries"], "bash"))
	}

	if err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	after := snapshot()
	for name := range tables {
		if after[name] != before[name] {
			t.Errorf("%s changed in migration 0011:\nbefore:\n%s\nafter:\n%s", name, before[name], after[name])
		}
	}
	// Partitioned, the rows spread over the partitions, the queue naming
	// each entry's session.
	for name := range tables {
		if name == "tlog_pending" {
			continue
		}
		var kind string
		var parts int
		err := owner.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT relkind::text FROM pg_class WHERE oid = '%[1]s'::regclass),
			(SELECT count(*) FROM pg_inherits WHERE inhparent = '%[1]s'::regclass)`, name)).Scan(&kind, &parts)
		if err != nil || kind != "p" || parts != 16 {
			t.Errorf("%s: relkind %q with %d partitions, %v; want a partitioned table of 16", name, kind, parts, err)
		}
	}
	var spread, mismatched int
	if err := owner.QueryRow(ctx, `SELECT (SELECT count(DISTINCT tableoid) FROM entries),
		(SELECT count(*) FROM tlog_pending p JOIN entries e ON e.id = p.entry_id WHERE e.session_id <> p.session_id)`).Scan(&spread, &mismatched); err != nil {
		t.Fatal(err)
	}
	if spread < 8 || mismatched != 0 {
		t.Errorf("40 sessions in %d partitions of entries, %d queue rows naming another session", spread, mismatched)
	}

	s := openStore(t, url, pgstore.Options{})
	if err := s.RecordRequest(ctx, "s-2", "r-2", "", time.Now()); err == nil {
		t.Error("request r-2 of session s-2 was not refused as a replay after the migration")
	}
	_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: "s-new", AgentID: "a", Entry: storetest.Synthetic(1, "")},
		[]byte(`{"payload":{"tool":{"name":"grep"}}}`), ledger.Seen{RequestID: "r-new", At: time.Now()},
		func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
	if err != nil {
		t.Fatal(err)
	}
	var id, queued int64
	var tool string
	err = owner.QueryRow(ctx, `SELECT e.id, (SELECT count(*) FROM tlog_pending p WHERE p.entry_id = e.id AND p.session_id = 's-new'),
		(SELECT tool_name FROM search_entries WHERE session_id = 's-new')
		FROM entries e WHERE e.session_id = 's-new'`).Scan(&id, &queued, &tool)
	if err != nil || id <= lastID || queued != 1 || tool != "grep" {
		t.Fatalf("new entry: id %d (last before %d), queued %d times, tool %q, %v", id, lastID, queued, tool, err)
	}
}

// TestSessionReadPlan checks that a session's page of entries reads one
// partition, by index.
func TestSessionReadPlan(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	var rs []ledger.Record
	for i := range 2000 {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s-%d", i%500), Entry: storetest.Synthetic(i, "")})
	}
	if _, err := s.AppendBatch(ctx, rs); err != nil {
		t.Fatal(err)
	}
	owner := ownerConn(t, url)
	// A partition of 2,000 / 16 entries is a few pages, which the planner
	// rightly reads whole; what partitioning decides is which partition
	// is read, and that an index finds the session within it.
	if _, err := owner.Exec(ctx, "ANALYZE entries; SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, owner, pgstore.QueryEntries, "s-7", 0, 100)
	read := make(map[string]bool)
	for _, m := range regexp.MustCompile(`on (entries_p\d\d) `).FindAllStringSubmatch(plan, -1) {
		read[m[1]] = true
	}
	if len(read) != 1 || strings.Contains(plan, "Append") || !strings.Contains(plan, "Index") {
		t.Errorf("a session's entries are not read from one partition by index:\n%s", plan)
	}
	es, err := s.Entries(ctx, "s-7", 0, 100)
	if err != nil || len(es) != 4 || es[3].Position != 3 {
		t.Fatalf("session s-7: %d entries, %v; want 4", len(es), err)
	}
}

// TestStoredByStepsPlan: the lookup of stored steps that plans every
// signed Guardian append finds each (session_id, step_id) key in the one
// partition of its session, under the generic plan a connection's
// statement cache keeps. That plan is made in a ledger's first minutes,
// from empty partitions: written as a join, it hashed the keys and read
// every partition of entries whole on every call (2.0-2.3 ms a call in
// acsledger bench guardian), a cost that grew with the ledger until an
// ANALYZE replanned it. Once the partitions have statistics, each key is
// an index lookup.
func TestStoredByStepsPlan(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	if _, err := s.AppendBatch(ctx, []ledger.Record{{SessionID: "s-1", Entry: storetest.Synthetic(1, "")}}); err != nil {
		t.Fatal(err)
	}
	owner := ownerConn(t, url)
	var step string
	if err := owner.QueryRow(ctx, "SELECT step_id FROM entries WHERE session_id = 's-1'").Scan(&step); err != nil {
		t.Fatal(err)
	}
	genericPlan := func() string {
		t.Helper()
		if _, err := owner.Exec(ctx, "DEALLOCATE ALL; SET plan_cache_mode = force_generic_plan; PREPARE lookup (text[], text[]) AS "+pgstore.QueryStoredBySteps, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		return explain(t, owner, "(ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE lookup ('{s-1}', '{"+step+"}')", pgx.QueryExecModeSimpleProtocol)
	}
	// A new ledger: a nested loop whose inner scan takes the key, so that
	// fifteen of the sixteen partitions are never read.
	plan := genericPlan()
	if strings.Contains(plan, "Hash") || !strings.Contains(plan, "Nested Loop") || strings.Count(plan, "(never executed)") != 15 ||
		!strings.Contains(plan, "session_id = k.session_id") {
		t.Errorf("on a new ledger, the step lookup's generic plan does not read one partition per key:\n%s", plan)
	}
	// With statistics, an index finds the key. A partition of 2,000 / 16
	// entries is a few pages, which the planner rightly reads whole; what
	// is checked here is that the key's index serves the lookup.
	var rs []ledger.Record
	for i := range 2000 {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s-%d", i%500), Entry: storetest.Synthetic(i+2, "")})
	}
	if _, err := s.AppendBatch(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "ANALYZE entries; SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	plan = genericPlan()
	if strings.Contains(plan, "Hash") || strings.Count(plan, "(never executed)") != 15 || strings.Count(plan, "Index Scan") != 16 ||
		!strings.Contains(plan, "rows=1 loops=1") {
		t.Errorf("with statistics, the step lookup's generic plan is not one index lookup per key:\n%s", plan)
	}
}

// TestPartitionKeys checks the shape that both partitioning by session and
// a distributed engine sharding by session (docs/storage.md) need: every
// partitioned table is partitioned by session_id, and each of its primary
// keys, unique keys and foreign keys includes session_id, so a session's
// rows of every table are checked within one partition.
func TestPartitionKeys(t *testing.T) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `
		SELECT p.partrelid::regclass::text, pg_get_partkeydef(p.partrelid), coalesce(k.conname, ''), coalesce(k.contype::text, ''),
		       coalesce(k.has_session, true)
		FROM pg_partitioned_table p
		JOIN pg_class r ON r.oid = p.partrelid AND r.relnamespace = 'public'::regnamespace AND NOT r.relispartition
		LEFT JOIN LATERAL (
			SELECT con.conname, con.contype,
			       'session_id' = ANY (SELECT a.attname::text FROM pg_attribute a
			                           WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)) AS has_session
			FROM pg_constraint con
			-- conparentid: PostgreSQL's own per-partition copies of a
			-- foreign key to a partitioned table.
			WHERE con.conrelid = p.partrelid AND con.contype IN ('p', 'u', 'f') AND con.conparentid = 0) k ON true
		ORDER BY 1, 3`)
	if err != nil {
		t.Fatal(err)
	}
	tables := make(map[string]int)
	for rows.Next() {
		var table, key, name, kind string
		var hasSession bool
		if err := rows.Scan(&table, &key, &name, &kind, &hasSession); err != nil {
			t.Fatal(err)
		}
		if key != "HASH (session_id)" {
			t.Errorf("%s is partitioned by %s", table, key)
		}
		if !hasSession {
			t.Errorf("%s: key %s (%s) does not include session_id", table, name, kind)
		}
		if kind != "" {
			tables[table]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Each table with its keys: the check saw them all.
	want := map[string]int{"entries": 4, "responses": 2, "request_params": 2, "erasures": 2, "requests": 1, "search_entries": 2, "source_records": 1, "source_erasures": 2}
	for table, n := range want {
		if tables[table] != n {
			t.Errorf("%s: %d keys checked, want %d", table, tables[table], n)
		}
	}
	if len(tables) != len(want) {
		t.Errorf("partitioned tables: %v, want those of %v", tables, want)
	}
}

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

// TestSessionLeavesPlan: the reads of one session's leaves are bounded
// scans of the session's tiles (migration 0018), at most a page of them
// (the inner Limit), and of those tiles' leaves by index, not scans of
// every leaf, so that
// holding a session against the log costs what the session holds.
func TestSessionLeavesPlan(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	storetest.AppendSessions(t, s, "s-%03d", 300, 3)
	l, err := tlog.New(ctx, s.LogStorage(), tlog.Config{Origin: "example.com/plan", Keys: []string{planLogKey(t)}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := l.Integrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	owner := ownerConn(t, url)
	// At this size the planner rightly reads the small tables whole; with
	// sequential scans off it must still find the bounded path.
	if _, err := owner.Exec(ctx, "ANALYZE tlog_leaves, tlog_session_tiles; SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for name, plan := range map[string]string{
		"SessionLeaves":   explain(t, owner, pgstore.QuerySessionLeaves, "s-150", 0, int64(1<<62), 1000),
		"LastSessionLeaf": explain(t, owner, pgstore.QueryLastSessionLeaf, "s-150", int64(900)),
	} {
		t.Logf("%s:\n%s", name, plan)
		if !strings.Contains(plan, "tlog_session_tiles_pkey") || !strings.Contains(plan, "tlog_leaves_pkey") ||
			strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "->  Limit") {
			t.Errorf("%s is not a scan of the session's tiles and their leaves by index:\n%s", name, plan)
		}
	}
}

func planLogKey(t *testing.T) string {
	t.Helper()
	skey, _, err := tlog.KeyFromSeed("example.com/plan", tlog.Ed25519, [32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	return skey
}

// TestSessionTilesMigration: migration 0018 indexes the leaves a ledger
// integrated before it by the session each leaf's data names, so the
// session readers find them after the upgrade, the index of 0008 is gone,
// and a leaf whose entry is missing is still found (the session comes from
// the leaf, not from entries).
func TestSessionTilesMigration(t *testing.T) {
	ctx := context.Background()
	url := newDBAt(t, 14)
	owner := ownerConn(t, url)
	// 600 leaves over three sessions, interleaved, with no entries behind
	// them: 0002 gives tlog_leaves no key to entries.
	var idx, ids []int64
	var hashes, data [][]byte
	for i := range int64(600) {
		l := tlog.Leaf{SessionID: fmt.Sprintf("m-%d", i%3), Position: i / 3, EntryHash: [32]byte{byte(i), byte(i >> 8)}}
		d, err := l.MarshalJCS()
		if err != nil {
			t.Fatal(err)
		}
		idx, ids, hashes, data = append(idx, i), append(ids, i+1), append(hashes, l.EntryHash[:]), append(data, d)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO tlog_leaves (idx, entry_id, entry_hash, data)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bytea[], $4::bytea[])`, idx, ids, hashes, data); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	var pairs []string
	rows, err := owner.Query(ctx, `SELECT session_id || '/' || tile FROM tlog_session_tiles ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if pairs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"m-0/0", "m-0/1", "m-0/2", "m-1/0", "m-1/1", "m-1/2", "m-2/0", "m-2/1", "m-2/2"}; fmt.Sprint(pairs) != fmt.Sprint(want) {
		t.Errorf("tlog_session_tiles after 0018 = %v, want %v", pairs, want)
	}
	var n int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname = 'tlog_leaves_session'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("tlog_leaves_session still exists (%d, %v)", n, err)
	}
	s, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LogStorage().SessionLeaves(ctx, "m-1", 250, 1<<63, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 117 || got[0].Index != 250 || got[len(got)-1].Index != 598 {
		t.Fatalf("SessionLeaves(m-1, from 250) = %d leaves, want 117 from 250 to 598", len(got))
	}
	for _, il := range got {
		if l, err := tlog.ParseLeaf(il.Data); err != nil || l.SessionID != "m-1" || il.Index%3 != 1 {
			t.Fatalf("leaf %d: %+v, %v", il.Index, l, err)
		}
	}
	last, err := s.LogStorage().LastSessionLeaf(ctx, "m-2", 513)
	if err != nil || last.Index != 512 {
		t.Fatalf("LastSessionLeaf(m-2, 513) = %d, %v; want 512", last.Index, err)
	}
	last, err = s.LogStorage().LastSessionLeaf(ctx, "m-2", 512)
	if err != nil || last.Index != 509 {
		t.Fatalf("LastSessionLeaf(m-2, 512) = %d, %v; want 509 (the tile before)", last.Index, err)
	}
}
