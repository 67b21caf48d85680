package sqlitestore_test

import (
	"context"
	"fmt"
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
	db := bypass(t, path, "")
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

// TestErasureEnforced proves that the SQLite triggers, not the code, limit
// erasure, for a connection that bypasses the store: a row of
// request_params goes only once an erasure names it, UPDATE stays
// refused, and erasures is append-only.
func TestErasureEnforced(t *testing.T) {
	ctx := context.Background()
	path, s := openFile(t, ledger.Options{})
	before := storetest.SeedSession(t, roles(s), 4, func(i int) []byte { return fmt.Appendf(nil, `{"payload":{"i":%d}}`, i) })
	db := bypass(t, path, "&_pragma=foreign_keys(1)")
	count := func(table string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refuse := func(sql, want string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, sql); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", sql, err, want)
		}
	}
	const appendOnly, noErasure = "append-only", "no erasure is recorded"
	refuse("DELETE FROM request_params", noErasure)
	refuse("DELETE FROM request_params WHERE session_id = 's' AND position = 1", noErasure)
	refuse("UPDATE request_params SET params = x'00'", appendOnly)
	refuse("INSERT INTO erasures (session_id, position, erased_at, reason, erased_by) VALUES ('s', 9, 0, 'why', 'who')", "FOREIGN KEY")
	refuse("INSERT INTO erasures (session_id, position, erased_at, reason, erased_by) VALUES ('s', 1, 0, ' ', 'who')", "CHECK")

	if _, err := db.ExecContext(ctx, "INSERT INTO erasures (session_id, position, erased_at, reason, erased_by) VALUES ('s', 1, 0, 'test', 'test')"); err != nil {
		t.Fatal(err)
	}
	refuse("UPDATE request_params SET params = x'00' WHERE position = 1", appendOnly)
	// A DELETE reaching a row without an erasure fails whole.
	refuse("DELETE FROM request_params WHERE position IN (1, 2)", noErasure)
	if n := count("request_params"); n != 4 {
		t.Fatalf("%d params rows after the refused statements, want 4", n)
	}
	refuse("UPDATE erasures SET reason = 'other'", appendOnly)
	refuse("DELETE FROM erasures", appendOnly)
	refuse("DELETE FROM erasures WHERE position = 1", appendOnly)

	res, err := db.ExecContext(ctx, "DELETE FROM request_params WHERE session_id = 's' AND position = 1")
	if err != nil {
		t.Fatalf("DELETE of an erased row: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 || count("request_params") != 3 || count("erasures") != 1 {
		t.Fatalf("deleted %d rows; %d params rows and %d erasures left, want 3 and 1", n, count("request_params"), count("erasures"))
	}
	storetest.CheckErasedByHand(t, roles(s), before)
}
