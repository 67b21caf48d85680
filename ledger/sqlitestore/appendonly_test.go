package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestAppendOnly proves that the SQLite triggers refuse to rewrite evidence
// even for a connection that bypasses the store.
func TestAppendOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlitestore.Open(ctx, path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, f := range storetest.Fixtures(t) {
		_, _, err := s.AppendRequest(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: f}, []byte(`{"payload":{}}`), ledger.Seen{RequestID: fmt.Sprintf("r-%d", i), At: time.Now()},
			func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
		if err != nil {
			t.Fatalf("fixture %d: %v", i, err)
		}
	}
	if err := s.RecordRequest(ctx, "s", "req-1", "n-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPolicyBundle(ctx, ledger.PolicyBundle{ID: "p", Version: "1",
		Digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Content: []byte{}}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
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
	after, err := s.Session(ctx, "s")
	if err != nil || after != before {
		t.Fatalf("session changed: %+v became %+v (%v)", before, after, err)
	}
	es, err := s.Entries(ctx, "s", 0, 100)
	if err != nil || len(es) != 4 || es[3].EntryHash != before.Head || es[2].StepType != "protocols/MCP/tools/call" {
		t.Fatalf("entries after the attempts: %+v, %v", es, err)
	}
	if b, err := s.Response(ctx, "s", 3); err != nil || string(b) != before.Head.String() {
		t.Fatalf("response after the attempts: %q, %v", b, err)
	}
}
