package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// erasureLedger returns a migrated database whose session "s" holds the
// four fixtures, each with params and a response, and the store over it.
func erasureLedger(t *testing.T) (string, *pgstore.Store) {
	t.Helper()
	url, s := newStore(t)
	storetest.SeedSession(t, roles(s), 4, erasureParams)
	return url, s
}

// erasureParams are the params of fixture i in an erasure test.
func erasureParams(i int) []byte { return fmt.Appendf(nil, `{"payload":{"i":%d}}`, i) }

func connectAs(t *testing.T, url, role string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if role != "" {
		if _, err := c.Exec(ctx, "SET ROLE "+role); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func countRows(t *testing.T, c *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestErasureEnforced proves that the database, not the code, limits
// erasure: a row of request_params goes only once an erasure names it and
// only for a role allowed to delete; UPDATE and TRUNCATE stay refused;
// erasures is append-only. The writer (the service) may do none of it.
func TestErasureEnforced(t *testing.T) {
	ctx := context.Background()
	url, s := erasureLedger(t)
	before, err := s.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	writer, owner, eraser := connectAs(t, url, pgstore.WriterRole), connectAs(t, url, ""), connectAs(t, url, pgstore.EraserRole)
	type who struct {
		name string
		conn *pgx.Conn
	}
	all := []who{{"writer", writer}, {"owner", owner}, {"eraser", eraser}}
	const denied, appendOnly, noErasure = "permission denied", "append-only", "no erasure is recorded"
	try := func(sql string, want map[string]string) {
		t.Helper()
		for _, w := range all {
			msg, ok := want[w.name]
			if !ok {
				continue
			}
			_, err := w.conn.Exec(ctx, sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, msg) {
				t.Errorf("%s: %s: got %v, want an error containing %q", w.name, sql, err, msg)
			}
		}
	}
	everyone := func(writer, owner, eraser string) map[string]string {
		return map[string]string{"writer": writer, "owner": owner, "eraser": eraser}
	}

	// No erasure recorded: every DELETE is refused, for every role.
	try("DELETE FROM request_params", everyone(denied, noErasure, noErasure))
	try("DELETE FROM request_params WHERE session_id = 's' AND position = 1", everyone(denied, noErasure, noErasure))
	try("UPDATE request_params SET params = 'forged'", everyone(denied, appendOnly, denied))
	try("UPDATE request_params SET params = params WHERE false", everyone(denied, appendOnly, denied))
	try("TRUNCATE request_params", everyone(denied, appendOnly, denied))
	try("INSERT INTO erasures VALUES ('s', 1, now(), 'why', 'who')", map[string]string{"writer": denied})
	// The eraser may erase, nothing else.
	try("INSERT INTO request_params SELECT 's', 9, 'x', now()", map[string]string{"eraser": denied})
	try("DELETE FROM responses", map[string]string{"eraser": denied})
	try("UPDATE heads SET length = length + 1", map[string]string{"eraser": denied})
	// An erasure names a stored entry and gives a reason.
	try("INSERT INTO erasures VALUES ('s', 9, now(), 'why', 'who')", map[string]string{"owner": "violates foreign key", "eraser": "violates foreign key"})
	try("INSERT INTO erasures VALUES ('s', 1, now(), '  ', 'who')", map[string]string{"owner": "violates check", "eraser": "violates check"})

	// An erasure of position 1 is recorded, its params not yet deleted.
	if _, err := eraser.Exec(ctx, "INSERT INTO erasures VALUES ('s', 1, now(), 'test', 'test')"); err != nil {
		t.Fatal(err)
	}
	// Now still: the writer lacks the privilege, UPDATE and TRUNCATE are
	// refused, and a DELETE reaching a row without an erasure fails whole.
	try("DELETE FROM request_params WHERE session_id = 's' AND position = 1", map[string]string{"writer": denied})
	try("UPDATE request_params SET params = 'forged' WHERE position = 1", everyone(denied, appendOnly, denied))
	try("TRUNCATE request_params", everyone(denied, appendOnly, denied))
	try("DELETE FROM request_params WHERE position IN (1, 2)", map[string]string{"owner": noErasure, "eraser": noErasure})
	if n := countRows(t, owner, "request_params"); n != 4 {
		t.Fatalf("%d params rows after the refused statements, want 4", n)
	}
	// erasures is append-only for everyone.
	try("UPDATE erasures SET reason = 'other'", everyone(denied, appendOnly, denied))
	try("DELETE FROM erasures", everyone(denied, appendOnly, denied))
	try("DELETE FROM erasures WHERE false", everyone(denied, appendOnly, denied))
	try("TRUNCATE erasures", everyone(denied, appendOnly, denied))

	// The eraser deletes the row the erasure names, and only that one.
	tag, err := eraser.Exec(ctx, "DELETE FROM request_params WHERE session_id = 's' AND position = 1")
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("eraser's DELETE of an erased row: %v, %d rows", err, tag.RowsAffected())
	}
	if n := countRows(t, owner, "request_params"); n != 3 {
		t.Fatalf("%d params rows, want 3", n)
	}
	if n := countRows(t, owner, "erasures"); n != 1 {
		t.Fatalf("%d erasures, want 1", n)
	}
	storetest.CheckErasedByHand(t, roles(s), before)
}

// TestEraseParamsRole: EraseParams acts as acsledger_eraser, so a login
// role that is only the service's (a member of acsledger_writer) cannot
// erase and writes nothing, and one granted acsledger_eraser too can.
func TestEraseParamsRole(t *testing.T) {
	ctx := context.Background()
	dbURL, owner := erasureLedger(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin := connectAs(t, dbURL, "")
	login := func(name string, roles ...string) string {
		t.Helper()
		name = name + "_" + strings.TrimPrefix(u.Path, "/") // roles are cluster-wide
		if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", name)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), dbURL)
			if err == nil {
				_, err = c.Exec(context.Background(), "DROP ROLE "+name)
				c.Close(context.Background())
			}
			if err != nil {
				t.Logf("couldn't drop role %s: %v", name, err)
			}
		})
		for _, r := range roles {
			if _, err := admin.Exec(ctx, fmt.Sprintf("GRANT %s TO %s", r, name)); err != nil {
				t.Fatal(err)
			}
		}
		lu := *u
		lu.User = url.UserPassword(name, "pw")
		return lu.String()
	}

	service := openStore(t, login("svc", pgstore.WriterRole), pgstore.Options{})
	if _, err := service.EraseParams(ctx, "s", 2, "why", "svc"); err == nil || !strings.Contains(err.Error(), "SET ROLE "+pgstore.EraserRole) {
		t.Fatalf("erase as the service's role: %v, want a SET ROLE refusal", err)
	}
	if b, err := owner.Request(ctx, "s", 2); err != nil || string(b) != `{"payload":{"i":2}}` {
		t.Fatalf("params after a refused erasure: %q, %v", b, err)
	}
	if n := countRows(t, admin, "erasures"); n != 0 {
		t.Fatalf("%d erasures recorded by a refused erasure", n)
	}
	// The store still works as the writer after the failed transaction.
	if b, err := service.Request(ctx, "s", 2); err != nil || string(b) != `{"payload":{"i":2}}` {
		t.Fatalf("the service's Request after its refused erasure: %q, %v", b, err)
	}

	// One connection: the DELETE below runs where the erasure ran.
	dpo := openStore(t, login("dpo", pgstore.WriterRole, pgstore.EraserRole), pgstore.Options{MaxConns: 1})
	if _, err := dpo.EraseParams(ctx, "s", 2, "why", "dpo"); err != nil {
		t.Fatal(err)
	}
	if _, err := service.Request(ctx, "s", 2); !errors.Is(err, ledger.ErrErased) {
		t.Fatalf("Request after the erasure: %v", err)
	}
	// The eraser role ended with the transaction: the connection is the
	// writer again, which may not delete.
	_, err = dpo.Pool().Exec(ctx, "DELETE FROM request_params WHERE session_id = 's' AND position = 2")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "permission denied") {
		t.Fatalf("a DELETE on the pool after EraseParams: %v, want permission denied", err)
	}
}
