package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestBaseBackup: a server started from a base backup holds the rows
// committed before the backup, not those committed after it, keeps the
// source's roles, and takes writes.
func TestBaseBackup(t *testing.T) {
	ctx := context.Background()
	src := pgtest.NewPrimary(t)
	db := src.NewDatabase(t)
	exec := func(url, sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
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
