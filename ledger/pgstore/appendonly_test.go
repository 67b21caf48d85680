package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestAppendOnly proves that the database, not the code, refuses to rewrite
// evidence: the service role lacks the privileges, and the owner (who has
// them) is stopped by the triggers.
func TestAppendOnly(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	before := storetest.SeedEvidence(t, roles(s))

	writer, owner := connectAs(t, url, pgstore.WriterRole), connectAs(t, url, "")

	type attempt struct {
		sql    string
		writer string // what refuses it for the service role
		owner  string // what refuses it for the owner
	}
	const denied, appendOnly, forward = "permission denied", "append-only", "may only move forward"
	for _, a := range []attempt{
		{"UPDATE entries SET step_type = 'rewritten'", denied, appendOnly},
		{"UPDATE entries SET content = content WHERE false", denied, appendOnly},
		{"DELETE FROM entries", denied, appendOnly},
		{"DELETE FROM entries WHERE false", denied, appendOnly},
		{"TRUNCATE entries CASCADE", denied, appendOnly},
		{"UPDATE sessions SET agent_id = 'mallory'", denied, appendOnly},
		{"DELETE FROM sessions", denied, appendOnly},
		{"TRUNCATE sessions CASCADE", denied, appendOnly},
		{"UPDATE responses SET response = 'forged'", denied, appendOnly},
		{"DELETE FROM responses", denied, appendOnly},
		{"UPDATE request_params SET params = 'forged'", denied, appendOnly},
		{"DELETE FROM request_params", denied, appendOnly},
		{"TRUNCATE request_params", denied, appendOnly},
		{"TRUNCATE responses", denied, appendOnly},
		{"DELETE FROM requests", denied, appendOnly},
		{"UPDATE requests SET nonce = ''", denied, appendOnly},
		{"TRUNCATE requests", denied, appendOnly},
		{"UPDATE policy_bundles SET content = 'x'", denied, appendOnly},
		{"DELETE FROM policy_bundles", denied, appendOnly},
		{"TRUNCATE policy_bundles", denied, appendOnly},
		{"DELETE FROM heads", denied, appendOnly},
		{"TRUNCATE heads CASCADE", denied, appendOnly},
		// The writer may move heads (length, head, updated_at) but only
		// forward; other columns are not granted.
		{"UPDATE heads SET length = length - 1", forward, forward},
		{"UPDATE heads SET session_id = 'other'", denied, forward},
		// Migration 0011: a partition named directly is refused as its
		// parent is (the writer holds no privilege on it).
		{"DELETE FROM entries_p00", denied, appendOnly},
		{"UPDATE entries_p07 SET step_type = 'rewritten'", denied, appendOnly},
		{"TRUNCATE entries_p15 CASCADE", denied, appendOnly},
		{"UPDATE responses_p03 SET response = 'forged'", denied, appendOnly},
		{"UPDATE request_params_p01 SET params = 'forged'", denied, appendOnly},
		{"TRUNCATE requests_p09", denied, appendOnly},
		{"DELETE FROM erasures_p11", denied, appendOnly},
		{"INSERT INTO entries_p02 (session_id, position, entry_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content) VALUES ('s', 0, sha256(''), 'x', 'x', 'x', 'x', now(), '{}')", denied, ""},
		{"DROP TABLE entries", "must be owner", ""},
		{"ALTER TABLE entries DISABLE TRIGGER entries_append_only", "must be owner", ""},
		{"INSERT INTO schema_migrations (version, name) VALUES (999, 'x')", denied, ""},
		// Migration 0014: only the entries' trigger queues entries for the
		// Merkle log (the queue has no key to entries any more).
		{"INSERT INTO tlog_pending (entry_id, session_id) VALUES (999999, 's')", denied, ""},
	} {
		for _, who := range []struct {
			name string
			conn *pgx.Conn
			want string
		}{{"writer", writer, a.writer}, {"owner", owner, a.owner}} {
			if who.want == "" {
				continue
			}
			_, err := who.conn.Exec(ctx, a.sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, who.want) {
				t.Errorf("%s: %s: got %v, want an error containing %q", who.name, a.sql, err, who.want)
			}
		}
	}

	storetest.CheckEvidence(t, roles(s), before)
}

// TestMigrateConcurrent runs Migrate on several databases and twice on one
// at the same time: the role creation and the version bookkeeping must
// tolerate it.
func TestMigrateConcurrent(t *testing.T) {
	ctx := context.Background()
	urls := []string{newDBRaw(t), newDBRaw(t), newDBRaw(t)}
	urls = append(urls, urls[0])
	errs := make(chan error, len(urls))
	for _, u := range urls {
		go func() { errs <- pgstore.Migrate(ctx, u) }()
	}
	for range urls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c, err := pgx.Connect(ctx, urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var versions []int32
	rows, _ := c.Query(ctx, "SELECT version FROM schema_migrations ORDER BY version")
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(versions) == 0 || versions[0] != 1 {
		t.Fatalf("schema_migrations: %v, %v", versions, err)
	}
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] {
			t.Fatalf("schema_migrations versions not increasing: %v", versions)
		}
	}
}
