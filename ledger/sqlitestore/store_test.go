package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

func open(t *testing.T, opts ledger.Options) storetest.Roles {
	_, s := openFile(t, opts)
	return roles(s)
}

// roles is s by the roles the conformance suite calls.
func roles(s *sqlitestore.Store) storetest.Roles {
	return storetest.Roles{Store: s, StepRecorder: s, StepReader: s, ParamsEraser: s, PolicyBundleStore: s}
}

// bypass opens the store's file at path as a connection that bypasses the
// store, with more pragmas if given ("&_pragma=..."), closed at t's end.
func bypass(t *testing.T, path, pragmas string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)"+pragmas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openFile opens a store on a fresh file, closed at t's end, and returns
// the file's path too, for tests that reach past the store.
func openFile(t *testing.T, opts ledger.Options) (string, *sqlitestore.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlitestore.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return path, s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

// TestLogStorage runs the Merkle log storage's conformance suite.
func TestLogStorage(t *testing.T) {
	t.Parallel()
	tlogstoretest.Run(t, tlogdb.SQLiteDB)
}

func TestIngestConformance(t *testing.T) {
	storetest.RunIngest(t, func(t *testing.T) ledger.IngestStore {
		_, s := openFile(t, ledger.Options{})
		return s
	})
}

func TestTokens(t *testing.T) {
	path, s := openFile(t, ledger.Options{})
	db := bypass(t, path, "")
	storetest.RunTokens(t, s, func(stmt string) error {
		_, err := db.Exec(stmt)
		return err
	})
}

func TestExport(t *testing.T) {
	path, s := openFile(t, ledger.Options{})
	db := bypass(t, path, "")
	storetest.RunExport(t, s, func(t *testing.T) {
		tlogtest.IntegrateAll(t, tlogstoretest.NewLog(t, s.LogStorage(), tlog.Config{}))
	}, func(stmt string) error {
		_, err := db.Exec(stmt)
		return err
	})
}
