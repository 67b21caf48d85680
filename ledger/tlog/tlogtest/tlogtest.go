// Package tlogtest sets up real databases holding ledger entries for tests of
// the Merkle log and its users: a migrated SQLite file or a migrated
// throwaway Postgres database (internal/pgtest), and entries appended the
// way the ledger appends them. It does not import ledger/tlog, so the log's
// own tests can use it.
package tlogtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Origin is the checkpoint origin of test logs.
const Origin = "acsledger.test/log"

// Seed returns a deterministic 32-byte key seed for label.
func Seed(label string) [32]byte {
	return sha256.Sum256([]byte("tlogtest key " + label))
}

// EntryHash is the stand-in entry_hash of the entry at pos of session.
func EntryHash(session string, pos int64) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos))
}

// OpenSQLite returns a migrated SQLite database in a temporary directory,
// with one connection (SQLite has one writer).
func OpenSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ms, err := migrations.SQLite()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
	}
	return db
}

// AppendSQLite appends n entries to session at positions from..from+n-1 in
// one transaction, creating the session when from is 0.
func AppendSQLite(t testing.TB, db *sql.DB, session string, from, n int64) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if from == 0 {
		if _, err := tx.Exec(`INSERT INTO sessions (session_id, agent_id, created_at) VALUES (?, 'agent', 0)`, session); err != nil {
			t.Fatal(err)
		}
	}
	stmt, err := tx.Prepare(`INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
		VALUES (?, ?, ?, ?, ?, ?, 'steps/toolCallRequest', '2026-01-01T00:00:00Z', ?, x'7b7d')`)
	if err != nil {
		t.Fatal(err)
	}
	for p := from; p < from+n; p++ {
		h, prev := hashes(session, p)
		if _, err := stmt.Exec(session, p, h, prev, fmt.Sprintf("e%d", p), fmt.Sprintf("s%d", p), time.Now().UnixMicro()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func hashes(session string, p int64) (h, prev []byte) {
	cur := EntryHash(session, p)
	if p > 0 {
		pr := EntryHash(session, p-1)
		prev = pr[:]
	}
	return cur[:], prev
}

// OpenPG returns a migrated throwaway Postgres database: a pool acting as
// acsledger_writer (as the service does) and one acting as the owner.
func OpenPG(t testing.TB) (writer, owner *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	owner, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	ms, err := migrations.Postgres()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if err := pgx.BeginFunc(ctx, owner, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, m.SQL)
			return err
		}); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE acsledger_writer")
		return err
	}
	writer, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)
	return writer, owner
}

// AppendPGTx appends entries inside tx, leaving the commit to the caller.
func AppendPGTx(t testing.TB, tx pgx.Tx, session string, from, n int64) {
	t.Helper()
	ctx := context.Background()
	if from == 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session_id, agent_id, created_at) VALUES ($1, 'agent', now())`, session); err != nil {
			t.Fatal(err)
		}
	}
	for p := from; p < from+n; p++ {
		h, prev := hashes(session, p)
		if _, err := tx.Exec(ctx, `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
			VALUES ($1, $2, $3, $4, $5, $6, 'steps/toolCallRequest', '2026-01-01T00:00:00Z', now(), '\x7b7d')`,
			session, p, h, prev, fmt.Sprintf("e%d", p), fmt.Sprintf("s%d", p)); err != nil {
			t.Fatal(err)
		}
	}
}

// AppendPG appends entries in one committed transaction.
func AppendPG(t testing.TB, pool *pgxpool.Pool, session string, from, n int64) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		AppendPGTx(t, tx, session, from, n)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Main runs a package's tests and stops the throwaway Postgres server if
// one was started: call it from TestMain.
func Main(m *testing.M) { pgtest.Main(m) }
