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

	exec := func(url, sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
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
