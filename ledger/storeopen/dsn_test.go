package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

const secret = "s3cret-pw"

// TestParseForms: both PostgreSQL forms are PostgreSQL, a directory is
// the embedded store, and what is neither is refused without printing the
// password. A key=value string was taken for a directory before.
func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		in       string
		postgres bool
		dir      string
		err      string
	}{
		{in: "host=db.internal dbname=ledger user=acs password=" + secret, postgres: true},
		{in: "dbname=ledger", postgres: true},
		{in: "  host = db port=5432", postgres: true},
		{in: "postgres://acs:" + secret + "@db/ledger", postgres: true},
		{in: "postgresql://acs:" + secret + "@db:bad/ledger", postgres: true},
		{in: "./a=b", dir: "./a=b"},
		{in: "sqlite:host=x", dir: "host=x"},
		{in: "/var/lib/acs ledger", dir: "/var/lib/acs ledger"},
		{in: "mysql://acs:" + secret + "@db/ledger", err: `unknown scheme "mysql"`},
		{in: "postgres:acs:" + secret + "@db", err: "starts postgres://"},
	} {
		got, err := storeopen.Parse(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), secret) {
				t.Errorf("Parse(%q): %v; want an error naming %q, without the password", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("Parse(%q): %v", tc.in, err)
		case tc.postgres && got.Postgres != tc.in, !tc.postgres && got.Dir != tc.dir:
			t.Errorf("Parse(%q) = %+v", tc.in, got)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://acs:" + secret + "@db:5432/ledger?sslmode=disable", "postgres://acs:xxxxx@db:5432/ledger?sslmode=disable"},
		{"postgres://acs:" + secret + "@db:badport/ledger", "postgres://acs:xxxxx@db:badport/ledger"},
		{"postgres://acs:" + secret + "%ZZ@db/ledger", "postgres://acs:xxxxx@db/ledger"},
		{"postgres://acs:pa@ss" + secret + "@db/ledger", "postgres://acs:xxxxx@db/ledger"},
		{"postgres://acs@db/ledger", "postgres://acs@db/ledger"},
		{"host=db password=" + secret + " dbname=x", "host=db password=xxxxx dbname=x"},
		{"host=db password='a b " + secret + "' dbname=x", "host=db password=xxxxx dbname=x"},
		{"host=db password = '" + secret + `\' x' dbname=x`, "host=db password = xxxxx dbname=x"},
		{"./acsledger data", "./acsledger data"},
		{"sqlite:/var/lib/acs", "sqlite:/var/lib/acs"},
	} {
		if got := storeopen.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestResolve takes the URL from ACSLEDGER_DB_URL when --db is empty and
// the password from a file, into both PostgreSQL forms; the driver reads
// the password back from what it gives.
func TestResolve(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("it's \\ "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(storeopen.EnvURL, "postgres://acs@db/ledger")
	for _, tc := range []struct{ flag, file, err string }{
		{"", pwFile, ""},
		{"host=db user=acs dbname=ledger", pwFile, ""},
		{"postgres://acs:other@db/ledger", pwFile, "already holds a password"},
		{"host=db password=other", pwFile, "already holds a password"},
		{"./data", pwFile, "not a PostgreSQL URL"},
		{"", filepath.Join(t.TempDir(), "missing"), "couldn't read the database password"},
	} {
		got, err := storeopen.Resolve(tc.flag, tc.file)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "other") {
				t.Errorf("Resolve(%q): %v; want an error naming %q, without the password", tc.flag, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Resolve(%q): %v", tc.flag, err)
		}
		cfg, err := pgxpool.ParseConfig(got)
		if err != nil || cfg.ConnConfig.Password != "it's \\ "+secret || cfg.ConnConfig.User != "acs" || cfg.ConnConfig.Database != "ledger" {
			t.Errorf("Resolve(%q) = %s: the driver reads %+v, %v", tc.flag, storeopen.Redact(got), cfg, err)
		}
	}
	if got, err := storeopen.Resolve("", ""); err != nil || got != "postgres://acs@db/ledger" {
		t.Errorf("from the environment: %q %v", got, err)
	}
}

// TestOpenKeyValue opens real Postgres by a key=value string, where a
// directory of that name used to be created and served on SQLite; and a
// string that cannot connect fails without printing its password.
func TestOpenKeyValue(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.ConnConfig
	dsn := "host='" + c.Host + "' dbname=" + c.Database + " user=" + c.User
	if c.Port != 0 {
		dsn += " port=" + strconv.Itoa(int(c.Port))
	}
	if c.Password != "" {
		dsn += " password='" + c.Password + "'"
	}
	t.Chdir(t.TempDir())
	if err := storeopen.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	st, err := storeopen.Open(ctx, dsn, ledger.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer st.Close()
	if _, err := st.Append(ctx, ledger.Record{SessionID: "kv", AgentID: "a", Entry: []byte(`{"entry_id":"e1","step_id":"s1","step_type":"steps/userMessage","timestamp":"2026-01-01T00:00:00Z"}`)}); err != nil {
		t.Fatalf("append: %v", err)
	}
	if ents, _ := os.ReadDir("."); len(ents) != 0 {
		t.Errorf("opening a key=value string created %v in the working directory", ents)
	}

	bad := "host=127.0.0.1 port=1 dbname=x user=acs password=" + secret + " connect_timeout=2"
	_, err = storeopen.Open(ctx, bad, ledger.Options{})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("open of an unreachable server: %v; want an error without the password", err)
	}
}

// TestResolveRead: the read replica's URL comes from --db-read or
// ACSLEDGER_DB_READ_URL (none is not an error), takes the password file's
// password, and must be PostgreSQL.
func TestResolveRead(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(storeopen.EnvReadURL, "")
	if got, err := storeopen.ResolveRead("", ""); got != "" || err != nil {
		t.Errorf("without a replica: %q %v", got, err)
	}
	t.Setenv(storeopen.EnvReadURL, "postgres://acs@standby:5432/ledger")
	got, err := storeopen.ResolveRead("", pwFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := pgxpool.ParseConfig(got); err != nil || cfg.ConnConfig.Host != "standby" || cfg.ConnConfig.Password != secret {
		t.Errorf("from the environment with a password file: %s: %v", storeopen.Redact(got), err)
	}
	if got, err := storeopen.ResolveRead("host=other dbname=ledger", ""); got != "host=other dbname=ledger" || err != nil {
		t.Errorf("the flag wins: %q %v", got, err)
	}
	if _, err := storeopen.ResolveRead("./replica-dir", ""); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("a directory as read replica: %v", err)
	}
}
