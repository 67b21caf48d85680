package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

func TestTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlitestore.Open(context.Background(), path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.RunTokens(t, s, func(stmt string) error {
		_, err := db.Exec(stmt)
		return err
	})
}
