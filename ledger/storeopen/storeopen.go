// Package storeopen opens a store named by a URL, for cmd/acsledger:
//
//	""                        embedded SQLite in ./acsledger-data
//	"postgres://..."          PostgreSQL (also "postgresql://...")
//	"host=... dbname=..."     PostgreSQL, as a key=value string: one that
//	                          starts with a keyword of lowercase letters and
//	                          underscores followed by '='
//	"sqlite:DIR"              embedded SQLite in directory DIR (DIR/ledger.db)
//	"DIR"                     the same, for any other value
//
// A value with another scheme (letters before "://", as in "mysql://...")
// is refused, and so is one starting "postgres:" that is not a URL. Every message
// prints a URL through Redact, which hides its password.
//
// It is the one package that imports both implementations.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
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
// (ledger.Store), what the Guardian records beside them (StepRecorder, StepReader,
// ParamsEraser, PolicyBundleStore) and the Merkle log's storage. Code that opens a
// store by URL gets all of it; code that uses a store declares the part it
// calls.
type Store interface {
	ledger.Store
	ledger.StepRecorder
	ledger.StepReader
	ledger.ParamsEraser
	ledger.SourceReader
	ledger.SourceEraser
	ledger.PayloadReader
	ledger.PolicyBundleStore
	ledger.TokenStore
	ledger.IngestStore
	ledger.ExportStore
	// RecordedSteps streams recorded steps for a what-if run
	// (ledger/steps.go).
	ledger.RecordedStepReader
	ledger.RetentionAdmin
	ledger.PayloadSweeper
	// RetentionStatus feeds the dashboard's retention tile.
	RetentionStatus(ctx context.Context) (ledger.RetentionStatus, error)
	// LogStorage returns the storage of the Merkle log over the store's
	// database, whose tables hold the leaves of the store's entries.
	LogStorage() tlog.Storage
	// Ping reports whether the store can take an append now (a readiness
	// check: acsledger serve's /readyz).
	Ping(ctx context.Context) error
	// SearchEntries and SearchSessions are the compliance search over
	// the entries' projection (ledger/search.go, migration 0010).
	SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error)
	SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error)
	// DailyStats, TreeSizes and QuarantineCount feed the UI's charts.
	DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error)
	TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error)
	QuarantineCount(ctx context.Context) (n int64, ok bool, err error)
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

// Parse interprets a store URL. Its errors show the URL redacted.
func Parse(url string) (Target, error) {
	switch {
	case url == "":
		return Target{Dir: DefaultDir}, nil
	case isPostgresURL(url), isDSN(url):
		return Target{Postgres: url}, nil
	case strings.HasPrefix(url, "sqlite:"):
		dir := strings.TrimPrefix(url, "sqlite:")
		if dir == "" {
			return Target{}, fmt.Errorf("store URL %q: sqlite: needs a directory", url)
		}
		return Target{Dir: dir}, nil
	}
	if strings.HasPrefix(url, "postgres:") || strings.HasPrefix(url, "postgresql:") {
		return Target{}, fmt.Errorf("store URL %s: a PostgreSQL URL starts postgres:// or postgresql://", Redact(url))
	}
	if i := strings.Index(url, "://"); i > 0 && !strings.ContainsAny(url[:i], `/\.`) {
		return Target{}, fmt.Errorf("store URL %s: unknown scheme %q (want postgres://, postgresql://, a key=value string host=... dbname=..., sqlite:DIR or a directory)", Redact(url), url[:i])
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
		st, err := pgstore.Open(ctx, t.Postgres, pgstore.Options{Options: opts})
		if err != nil {
			return nil, redactedError(t.Postgres, err)
		}
		return st, nil
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("couldn't create store directory: %w", err)
	}
	// The directory holds the database and, by default, the keys: its
	// owner's only, also when an earlier version created it 0755.
	if err := os.Chmod(t.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("couldn't make the store directory its owner's only: %w", err)
	}
	return sqlitestore.Open(ctx, filepath.Join(t.Dir, SQLiteFile), opts)
}

// Reach checks that the store named by url can be opened before a command
// creates anything beside it (its key directory, its master key): a
// Postgres server must accept a connection; an embedded store needs none.
func Reach(ctx context.Context, url string) error {
	t, err := Parse(url)
	if err != nil || t.Postgres == "" {
		return err
	}
	conn, err := pgstore.Connect(ctx, t.Postgres)
	if err != nil {
		return redactedError(t.Postgres, err)
	}
	return conn.Close(ctx)
}

// Migrate applies pending migrations to the store named by url. For
// Postgres it must run as the schema owner.
func Migrate(ctx context.Context, url string) error {
	t, err := Parse(url)
	if err != nil {
		return err
	}
	if t.Postgres != "" {
		return redactedError(t.Postgres, pgstore.Migrate(ctx, t.Postgres))
	}
	s, err := Open(ctx, url, ledger.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// redactedError makes sure err does not print the password of db: the
// driver redacts the connection strings it quotes, and this holds whatever
// a lower layer does.
func redactedError(db string, err error) error {
	if err == nil {
		return nil
	}
	if pw := password(db); pw != "" && strings.Contains(err.Error(), pw) {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
	}
	return err
}

// password is the password db holds, or "".
func password(db string) string {
	if m := dsnPassword.FindStringSubmatch(db); isDSN(db) && m != nil {
		return strings.Trim(m[2], "'")
	}
	if u, err := neturl.Parse(db); err == nil {
		pw, _ := u.User.Password()
		return pw
	}
	if m := urlPassword.FindStringSubmatch(db); m != nil {
		return m[2]
	}
	return ""
}
