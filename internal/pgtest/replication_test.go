package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestSynchronousStandby: a row committed on the primary is on the
// synchronous standby, which refuses writes until it is promoted after
// the primary's kill -9, and then takes them.
func TestSynchronousStandby(t *testing.T) {
	ctx := context.Background()
	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "standby1")
	primary.SetSynchronous(t, "standby1")
	db := primary.NewDatabase(t)
	onStandby := pgtest.Hosts(t, db, standby)

	exec := func(url, sql string) error { return pgtest.ExecURL(ctx, url, sql) }
	// count is the rows of t on the standby; -1 while the standby has not
	// replayed the database or the table yet.
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, onStandby)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			return -1
		}
		return n
	}
	if err := exec(db, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// Synchronous commit waits for the standby's flush, not its replay:
	// the row becomes visible there a moment later.
	deadline := time.Now().Add(10 * time.Second)
	for count() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the committed row never reached the standby")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := exec(onStandby, "INSERT INTO t VALUES (2)"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write on the standby: %v, want a read-only refusal", err)
	}
	primary.Kill(t)
	standby.Promote(t)
	if err := exec(onStandby, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("write on the promoted standby: %v", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("promoted standby holds %d rows, want 2", n)
	}
}

// TestBaseBackup: a server started from a base backup holds the rows
// committed before the backup, not those committed after it, keeps the
// source's roles, and takes writes.
func TestBaseBackup(t *testing.T) {
	ctx := context.Background()
	src := pgtest.NewPrimary(t)
	db := src.NewDatabase(t)
	exec := func(url, sql string) error { return pgtest.ExecURL(ctx, url, sql) }
	if err := exec(db, "CREATE ROLE drill_role; CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	backup := src.BaseBackup(t)
	if err := exec(db, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	restored := backup.Start(t)
	onRestored := strings.Replace(db, src.Addr(), restored.Addr(), 1)
	if onRestored == db {
		t.Fatalf("the restored server listens on the source's address %s", src.Addr())
	}
	conn, err := pgx.Connect(ctx, onRestored)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows string
	var role bool
	if err := conn.QueryRow(ctx, "SELECT string_agg(x::text, ',' ORDER BY x), EXISTS (SELECT FROM pg_roles WHERE rolname = 'drill_role') FROM t").Scan(&rows, &role); err != nil {
		t.Fatal(err)
	}
	if rows != "1" || !role {
		t.Fatalf("the restored server holds rows %q and the role: %v; want rows \"1\" and the role", rows, role)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (3)"); err != nil {
		t.Fatalf("write on the restored server: %v", err)
	}
}
