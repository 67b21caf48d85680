package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    storeopen.Target
		wantErr string
	}{
		{"", storeopen.Target{Dir: "acsledger-data"}, ""},
		{"sqlite:/var/lib/acsledger", storeopen.Target{Dir: "/var/lib/acsledger"}, ""},
		{"./data", storeopen.Target{Dir: "./data"}, ""},
		{"/srv/a.b://c", storeopen.Target{Dir: "/srv/a.b://c"}, ""},
		{"postgres://u@h/db", storeopen.Target{Postgres: "postgres://u@h/db"}, ""},
		{"postgresql://u@h/db", storeopen.Target{Postgres: "postgresql://u@h/db"}, ""},
		{"sqlite:", storeopen.Target{}, "needs a directory"},
		{"mysql://u@h/db", storeopen.Target{}, `unknown scheme "mysql"`},
	} {
		got, err := storeopen.Parse(tc.url)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q): error %v, want %q", tc.url, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := storeopen.Open(ctx, "sqlite:"+dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*sqlitestore.Store); !ok {
		t.Fatalf("got %T, want *sqlitestore.Store", s)
	}
	if n := storeopen.ParallelWriters(storeopen.NotifyOnAppend(s, func() {})); n != 1 {
		t.Errorf("parallel writers of a wrapped sqlitestore: %d, want 1", n)
	}
	fx := storetest.Fixtures(t)
	r, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: fx[0]})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, storeopen.SQLiteFile)); err != nil {
		t.Fatal(err)
	}
	// Reopening (and re-migrating) keeps the data.
	if err := storeopen.Migrate(ctx, dir); err != nil {
		t.Fatal(err)
	}
	s, err = storeopen.Open(ctx, dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	se, err := s.Session(ctx, "s")
	if err != nil || se.Head != r.EntryHash {
		t.Fatalf("after reopening: %+v, %v", se, err)
	}
}

func TestOpenPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	if err := storeopen.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	// Migrating twice is a no-op.
	if err := storeopen.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	s, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*pgstore.Store); !ok {
		t.Fatalf("got %T, want *pgstore.Store", s)
	}
	// Ingest writes to PostgreSQL in two transactions at once, through
	// serve's wrapper too.
	if n := storeopen.ParallelWriters(storeopen.NotifyOnAppend(s, func() {})); n != 2 {
		t.Errorf("parallel writers of a wrapped pgstore: %d, want 2", n)
	}
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: storetest.Fixtures(t)[0]}); err != nil {
		t.Fatal(err)
	}
}
