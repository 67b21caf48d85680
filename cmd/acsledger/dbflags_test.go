package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

const dbSecret = "s3cret-db-pw"

// TestDBCredentialsNeverPrinted: a URL that does not parse and a key=value
// string that cannot connect both fail naming the store without its
// password, and the key=value string is not taken for a directory (it was
// created, logged and served on SQLite before).
func TestDBCredentialsNeverPrinted(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"URL that does not parse", []string{"migrate", "--db", "postgres://acs:" + dbSecret + "@127.0.0.1:badport/ledger"}},
		{"URL with a bad escape", []string{"migrate", "--db", "postgres://acs:" + dbSecret + "%ZZ@127.0.0.1/ledger"}},
		{"key=value string", []string{"serve", "--db", "host=127.0.0.1 port=1 dbname=ledger user=acs password=" + dbSecret + " connect_timeout=2"}},
		{"another scheme", []string{"export", "--session", "s", "--db", "mysql://acs:" + dbSecret + "@db/ledger"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != 1 || strings.Contains(out, dbSecret) || !strings.Contains(out, "xxxxx") {
				t.Errorf("exit %d, output %q; want exit 1 naming the store with its password as xxxxx", code, out)
			}
			if ents, _ := os.ReadDir("."); len(ents) != 0 {
				t.Errorf("the command created %v", ents)
			}
		})
	}
}

// TestDBURLFromEnvironmentAndPasswordFile migrates real Postgres named
// only by ACSLEDGER_DB_URL, with the password from --db-password-file:
// nothing secret is on the command line, and the output hides it.
func TestDBURLFromEnvironmentAndPasswordFile(t *testing.T) {
	url := pgtest.NewDatabase(t)
	t.Setenv(storeopen.EnvURL, url)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"migrate"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "migrated postgres") {
		t.Fatalf("migrate from the environment: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	pw := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(pw, []byte(dbSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	// The test server trusts its loopback clients, so the password is
	// carried and not checked; what matters is where it shows.
	code := run(context.Background(), []string{"migrate", "--db-password-file", pw}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != 0 || strings.Contains(out, dbSecret) || !strings.Contains(out, ":xxxxx@") {
		t.Fatalf("migrate with a password file: exit %d, output %q; want success, the password shown as xxxxx", code, out)
	}
}
