// Package sqlitestore is the embedded ledger.Store: one SQLite file (pure Go,
// modernc.org/sqlite) in WAL mode, for single-machine deployments and the
// zero-configuration default of acsledger serve.
//
// Writes go through one connection, serialized in-process, and concurrent
// Appends share transactions (group commit); reads use a separate
// read-only pool. SQLite has no roles, so triggers alone keep the
// evidence tables append-only.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/groupcommit"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
	"github.com/acsledger/acsledger/migrations"
)

// Store is the SQLite ledger.Store: ledger/internal/sqlstore's over this
// package's driver (driver.go), with the write path of appends and
// ingests (append.go, ingestwrite.go) its own.
type Store struct {
	*sqlstore.Store
	write *sql.DB // one connection: SQLite allows one writer at a time
	read  *sql.DB
	opts  ledger.Options
}

// The Store has every role of the ledger; storeopen asserts each
// (storeopen.Store).
var _ ledger.Store = (*Store)(nil)

// pragmas for every connection. synchronous=FULL keeps every commit durable
// in WAL mode (NORMAL would not sync the WAL on commit). secure_delete
// zeroes what a DELETE frees where that costs no extra I/O, so that an
// erased params record, data key included, does not linger in a free
// page of the file.
const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=secure_delete(FAST)"

// Open opens (creating if needed) the database file at path and applies
// every pending migration.
func Open(ctx context.Context, path string, opts ledger.Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite database path %q: must be non-empty and contain no '?' or '#'", path)
	}
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", path+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("couldn't open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	s := &Store{write: write, opts: opts}
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("couldn't open %s: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	s.read = read
	s.Store = sqlstore.New(sqlstore.Config{
		Driver: &driver{s: s, read: &querier{read}, write: &querier{write}}, Dialect: dialect{}, Queries: q.Queries, Options: opts,
		// One queue: there is one writer connection anyway.
		Commit: groupcommit.Options{Queues: 1},
	})
	return s, nil
}

// Close stops the committer, after it has written what was queued, and
// closes both connection pools.
func (s *Store) Close() error {
	s.Store.Close()
	return errors.Join(s.write.Close(), s.read.Close())
}

// Ping reports whether the store's database file can be reached for
// writing.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("couldn't reach the database: %w", err)
	}
	return nil
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it if
// fn returns nil. Every write of the store goes through here.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("couldn't begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("couldn't commit: %w", err)
	}
	return nil
}

// inTxRetry is inTx for a write that plans against the heads it reads: it
// runs fn again, in a fresh transaction, while fn reports
// sqlstore.ErrHeadMoved, at most ten times more.
func (s *Store) inTxRetry(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.inTx(ctx, fn)
		if errors.Is(err, sqlstore.ErrHeadMoved) && attempt < 10 {
			continue
		}
		return err
	}
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations.SQLite()
	if err != nil {
		return err
	}
	if _, err := s.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("couldn't create schema_migrations: %w", err)
	}
	for _, m := range ms {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, s.opts.Clock()().UnixMicro())
			return err
		})
		if err != nil {
			return fmt.Errorf("couldn't apply migration sqlite/%s: %w", m.Name, err)
		}
	}
	return nil
}

// DBs returns the store's writer (one connection) and reader handles, for
// tests and tools that read or write the tables directly (internal/tlogdb).
// The Merkle log's storage (LogStorage) uses them too, so its writes queue
// behind the store's on the single writer connection, as SQLite requires.
func (s *Store) DBs() (write, read *sql.DB) { return s.write, s.read }

// ownerOnly makes the database file readable and writable by its owner
// only (0600), creating it empty if it does not exist, and tightens the
// WAL and shared-memory files left by an earlier run. SQLite creates the
// -wal and -shm files with the mode of the database file, so they follow.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("couldn't create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("couldn't make %s readable by its owner only: %w", p, err)
		}
	}
	return nil
}
