package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
)

func open(t *testing.T, opts ledger.Options) storetest.Roles {
	_, s := openFile(t, opts)
	return roles(s)
}

// roles is s by the roles the conformance suite calls.
func roles(s *sqlitestore.Store) storetest.Roles {
	return storetest.Roles{Store: s, StepRecorder: s, StepReader: s, ParamsEraser: s, PolicyBundleStore: s}
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
