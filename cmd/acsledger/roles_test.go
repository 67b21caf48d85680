package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// writerLogin migrates a fresh database on the shared test server as its
// owner and returns the URL of the acsledger_writer login on it: what a
// deployment's serve connects with. (The role is cluster-wide; the test
// server trusts local logins, so the password is only for the URL's
// shape.)
func writerLogin(t *testing.T) string {
	t.Helper()
	owner := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := storeopen.Migrate(ctx, owner); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER ROLE acsledger_writer LOGIN PASSWORD 'writer'"); err != nil {
		t.Fatal(err)
	}
	return withUser(t, owner, "acsledger_writer", "writer")
}

func withUser(t *testing.T, raw, user, password string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// TestLeastPrivilege sets a PostgreSQL server up as docker-compose does
// (deploy/postgres-init run by the superuser: an owner login that is no
// superuser, a writer login, the database), migrates as the owner and
// serves as the writer. The writer-only login starts the service, which
// records entries and decisions; serve never migrates, and refuses an
// unmigrated database with a clear message; and the service's login cannot
// disable a trigger, set session_replication_role, or SET ROLE / RESET
// ROLE into the owner or the superuser.
func TestLeastPrivilege(t *testing.T) {
	ps := pgtest.NewServer(t)
	admin := ps.NewDatabase(t) // the superuser's URL; only for the init script and its host
	u, _ := url.Parse(admin)
	host, port, _ := strings.Cut(u.Host, ":")
	initdb := exec.Command("sh", "../../deploy/postgres-init/10-acsledger-roles.sh")
	initdb.Env = append(os.Environ(), "PGHOST="+host, "PGPORT="+port, "POSTGRES_USER=postgres",
		"ACSLEDGER_OWNER_PASSWORD=owner-pw", "ACSLEDGER_WRITER_PASSWORD=writer-pw")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("init script: %v\n%s", err, out)
	}
	dbURL := func(user, password, db string) string {
		v := withUser(t, admin, user, password)
		w, _ := url.Parse(v)
		w.Path = "/" + db
		return w.String()
	}
	ownerURL, writerURL := dbURL("acsledger_owner", "owner-pw", "acsledger"), dbURL("acsledger_writer", "writer-pw", "acsledger")
	ctx := context.Background()

	// Before migrate, serve refuses to start, and creates nothing.
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys)
	out, err := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", writerURL, "--keys", keys).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run `acsledger migrate` as the database owner first") {
		t.Fatalf("serve on an unmigrated database: %v\n%s", err, out)
	}
	if out, err := exec.Command(binary, "migrate", "--db", writerURL).CombinedOutput(); err == nil {
		t.Fatalf("the writer login migrated the database:\n%s", out)
	}
	if out, err := exec.Command(binary, "migrate", "--db", ownerURL).CombinedOutput(); err != nil {
		t.Fatalf("migrate as the owner: %v\n%s", err, out)
	}

	s := startServer(t, "--db", writerURL, "--keys", keys)
	if code, body := post(t, s.url+"/api/v1/sessions/lp-1/entries?agent_id=a", entryJSON(1)); code != http.StatusCreated {
		t.Fatalf("append as the writer: %d %v", code, body)
	}
	var demo, errs strings.Builder
	if code := run(t.Context(), []string{"demo", "--url", s.url, "--keys", keys}, &demo, &errs); code != 0 {
		t.Fatalf("demo against the writer-only service: exit %d\n%s\n%s\n%s", code, demo.String(), errs.String(), s.log())
	}

	conn, err := pgx.Connect(ctx, writerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super, createRole bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user").Scan(&super, &createRole); err != nil || super || createRole {
		t.Fatalf("writer login: superuser %v, createrole %v, %v", super, createRole, err)
	}
	for _, attempt := range []string{
		"ALTER TABLE entries DISABLE TRIGGER entries_append_only",
		"ALTER TABLE entries DISABLE TRIGGER ALL",
		"SET session_replication_role = replica",
		"RESET ROLE; SET ROLE acsledger_owner",
		"SET ROLE acsledger_owner",
		"SET ROLE postgres",
		"SET ROLE acsledger_eraser",
		"SET SESSION AUTHORIZATION acsledger_owner",
		"DELETE FROM entries",
		"UPDATE entries SET content = content",
		"TRUNCATE entries",
		"DROP TABLE entries",
		"GRANT acsledger_owner TO acsledger_writer",
	} {
		_, err := conn.Exec(ctx, attempt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the writer login: %v, want insufficient_privilege (42501)", attempt, err)
		}
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != "acsledger_writer" {
		t.Fatalf("after the attempts the session acts as %q, %v", user, err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM entries").Scan(&n); err != nil || n == 0 {
		t.Fatalf("entries after the attempts: %d, %v", n, err)
	}
}
