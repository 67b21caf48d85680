package tlog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/acsledger/acsledger/migrations"
	_ "modernc.org/sqlite"
)

const testOrigin = "acsledger.test/log"

// testKeys are deterministic log keys: Ed25519 and ML-DSA-44.
func testKeys(t testing.TB) (skeys, vkeys []string) {
	t.Helper()
	for i, alg := range []Algorithm{Ed25519, CosignatureMLDSA44} {
		seed := sha256.Sum256(fmt.Appendf(nil, "tlog test key %d", i))
		s, v, err := KeyFromSeed(testOrigin, alg, seed)
		if err != nil {
			t.Fatal(err)
		}
		skeys, vkeys = append(skeys, s), append(vkeys, v)
	}
	return skeys, vkeys
}

// openSQLite makes a migrated SQLite database in a temporary directory.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
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

// entryHash is a deterministic stand-in for a ContextEntry's entry_hash.
func entryHash(session string, pos int64) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos))
}

// appendEntries writes n entries to session (creating it if needed) the
// way the ledger does, at positions from..from+n-1.
func appendEntries(t testing.TB, db *sql.DB, session string, from, n int64) {
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
		var prev []byte
		if p > 0 {
			h := entryHash(session, p-1)
			prev = h[:]
		}
		h := entryHash(session, p)
		if _, err := stmt.Exec(session, p, h[:], prev, fmt.Sprintf("e%d", p), fmt.Sprintf("s%d", p), time.Now().UnixMicro()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// integrateAll runs the integrator until nothing is pending.
func integrateAll(t testing.TB, l *Log) {
	t.Helper()
	for {
		n, err := l.Integrate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}
