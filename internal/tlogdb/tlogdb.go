// Package tlogdb opens real stores for tests of the Merkle log and its
// users, an embedded store on a temporary SQLite file or a Postgres store on
// a throwaway database (internal/pgtest), and appends entries to them the
// way the ledger appends them, with tlogtest's stand-in hashes, so they
// join the log's pending queue. SQLiteDB and PGDB hand a store to the log
// storage conformance suite (ledger/tlog/tlogstoretest).
package tlogdb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// SQLite opens an embedded store in a temporary directory.
func SQLite(t testing.TB) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// AppendSQLite appends n entries to session at positions from..from+n-1 in
// one transaction, creating the session when from is 0.
func AppendSQLite(t testing.TB, st *sqlitestore.Store, session string, from, n int64) {
	t.Helper()
	db, _ := st.DBs()
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
	cur := tlogtest.EntryHash(session, p)
	if p > 0 {
		pr := tlogtest.EntryHash(session, p-1)
		prev = pr[:]
	}
	return cur[:], prev
}

// countsSQL reads tlogstoretest.Counts in both dialects.
const countsSQL = `SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM tlog_leaves),
	(SELECT count(DISTINCT entry_id) FROM tlog_leaves), (SELECT count(*) FROM tlog_pending),
	(SELECT coalesce(max(idx), -1) FROM tlog_leaves)`

// SQLiteDB is an embedded store as the log storage suite's DB.
func SQLiteDB(t *testing.T) tlogstoretest.DB {
	st := SQLite(t)
	return tlogstoretest.DB{
		Storage: st.LogStorage(),
		Append: func(t testing.TB, session string, from, n int64) {
			t.Helper()
			AppendSQLite(t, st, session, from, n)
		},
		Counts: func(t testing.TB) (c tlogstoretest.Counts) {
			t.Helper()
			db, _ := st.DBs()
			if err := db.QueryRow(countsSQL).Scan(&c.Entries, &c.Leaves, &c.DistinctLeafEntries, &c.Pending, &c.MaxLeafIndex); err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
}

// PG opens a Postgres store over a fresh, migrated throwaway database,
// whose connections act as acsledger_writer as the service's do, and a
// pool acting as the database's owner.
func PG(t testing.TB) (st *pgstore.Store, owner *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	owner, err = pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	return st, owner
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

// PGDB is a Postgres store as the log storage suite's DB.
func PGDB(t *testing.T) tlogstoretest.DB {
	st, _ := PG(t)
	pool := st.Pool()
	return tlogstoretest.DB{
		Storage: st.LogStorage(),
		Append: func(t testing.TB, session string, from, n int64) {
			t.Helper()
			AppendPG(t, pool, session, from, n)
		},
		AppendUncommitted: func(t testing.TB, session string, from, n int64) func() {
			t.Helper()
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback(ctx) })
			AppendPGTx(t, tx, session, from, n)
			return func() {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		},
		Counts: func(t testing.TB) (c tlogstoretest.Counts) {
			t.Helper()
			if err := pool.QueryRow(context.Background(), countsSQL).Scan(&c.Entries, &c.Leaves, &c.DistinctLeafEntries, &c.Pending, &c.MaxLeafIndex); err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
}

// Main runs a package's tests and stops the throwaway Postgres server if
// one was started: call it from TestMain.
func Main(m *testing.M) { pgtest.Main(m) }
