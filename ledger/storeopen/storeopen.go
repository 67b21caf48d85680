// Package storeopen opens a store named by a URL, for cmd/acsledger:
//
//	""                        embedded SQLite in ./acsledger-data
//	"sqlite:DIR" or "DIR"     embedded SQLite in directory DIR (DIR/ledger.db)
//	"postgres://..."          PostgreSQL (also "postgresql://...")
//
// It is the one package that imports both implementations.
package storeopen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// Store is everything both stores keep in one database: the entries
// (ledger.Store), what the Guardian records beside them (ledger.
// GuardianStore) and the Merkle log's storage. Code that opens a store by
// URL gets all of it; code that uses a store declares the part it calls.
type Store interface {
	ledger.GuardianStore
	ledger.TokenStore
	// LogStorage returns the storage of the Merkle log over the store's
	// database, whose tables hold the leaves of the store's entries.
	LogStorage() tlog.Storage
	// SearchEntries and SearchSessions are the compliance search over
	// the entries' projection (ledger/search.go, migration 0010).
	SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error)
	SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error)
	// DailyStats, TreeSizes and Quarantined feed the UI's charts.
	DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error)
	TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error)
	Quarantined(ctx context.Context) (n int64, ok bool, err error)
}

var (
	_ Store = (*pgstore.Store)(nil)
	_ Store = (*sqlitestore.Store)(nil)
)

// DefaultDir is the embedded store's directory when the URL is empty.
const DefaultDir = "acsledger-data"

// SQLiteFile is the database file's name inside an embedded store's
// directory.
const SQLiteFile = "ledger.db"

// Target is a parsed store URL.
type Target struct {
	// Postgres is the connection URL, or "" for an embedded store.
	Postgres string
	// Dir is the embedded store's directory, or "" for Postgres.
	Dir string
}

// Parse interprets a store URL.
func Parse(url string) (Target, error) {
	switch {
	case url == "":
		return Target{Dir: DefaultDir}, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return Target{Postgres: url}, nil
	case strings.HasPrefix(url, "sqlite:"):
		dir := strings.TrimPrefix(url, "sqlite:")
		if dir == "" {
			return Target{}, fmt.Errorf("store URL %q: sqlite: needs a directory", url)
		}
		return Target{Dir: dir}, nil
	}
	if i := strings.Index(url, "://"); i > 0 && !strings.ContainsAny(url[:i], `/\.`) {
		return Target{}, fmt.Errorf("store URL %q: unknown scheme %q (want postgres://, sqlite:DIR or a directory)", url, url[:i])
	}
	return Target{Dir: url}, nil
}

// Open opens the store named by url. An embedded store is created and
// migrated as needed; a Postgres database must have been migrated (Migrate)
// by its owner first.
func Open(ctx context.Context, url string, opts ledger.Options) (Store, error) {
	t, err := Parse(url)
	if err != nil {
		return nil, err
	}
	if t.Postgres != "" {
		return pgstore.Open(ctx, t.Postgres, pgstore.Options{Options: opts})
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("couldn't create store directory: %w", err)
	}
	return sqlitestore.Open(ctx, filepath.Join(t.Dir, SQLiteFile), opts)
}

// Migrate applies pending migrations to the store named by url. For
// Postgres it must run as the schema owner.
func Migrate(ctx context.Context, url string) error {
	t, err := Parse(url)
	if err != nil {
		return err
	}
	if t.Postgres != "" {
		return pgstore.Migrate(ctx, t.Postgres)
	}
	s, err := Open(ctx, url, ledger.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}
