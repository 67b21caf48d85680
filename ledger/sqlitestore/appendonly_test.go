package sqlitestore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestAppendOnly proves that the SQLite triggers refuse to rewrite evidence
// even for a connection that bypasses the store.
func TestAppendOnly(t *testing.T) {
	ctx := context.Background()
	path, s := openFile(t, ledger.Options{})
	before := storetest.SeedEvidence(t, roles(s))
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, a := range []struct{ sql, want string }{
		{"UPDATE entries SET step_type = 'rewritten'", "append-only"},
		{"UPDATE entries SET content = x'00' WHERE position = 2", "append-only"},
		{"DELETE FROM entries", "append-only"},
		{"DELETE FROM entries WHERE position = 3", "append-only"},
		{"UPDATE sessions SET agent_id = 'mallory'", "append-only"},
		{"DELETE FROM sessions", "append-only"},
		{"DELETE FROM heads", "append-only"},
		{"UPDATE responses SET response = x'00'", "append-only"},
		{"DELETE FROM responses", "append-only"},
		{"UPDATE request_params SET params = x'00'", "append-only"},
		{"DELETE FROM request_params", "append-only"},
		{"UPDATE requests SET nonce = ''", "append-only"},
		{"DELETE FROM requests", "append-only"},
		{"UPDATE policy_bundles SET content = x'00'", "append-only"},
		{"DELETE FROM policy_bundles", "append-only"},
		{"UPDATE heads SET length = length - 1", "only move forward"},
		{"UPDATE heads SET session_id = 'other', length = length + 1", "only move forward"},
	} {
		if _, err := db.ExecContext(ctx, a.sql); err == nil || !strings.Contains(err.Error(), a.want) {
			t.Errorf("%s: got %v, want an error containing %q", a.sql, err, a.want)
		}
	}
	storetest.CheckEvidence(t, roles(s), before)
}
