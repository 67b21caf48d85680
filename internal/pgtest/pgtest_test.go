package pgtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Durability stays on: benchmarks on this server must mean something.
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("%s = %s, want on", setting, v)
		}
	}
	// The database is empty and ours to write.
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	var n int
	if err := conn2.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("second database sees the first one's table: n=%d, %v", n, err)
	}
}

// TestUnavailable runs this test binary again against a server that does
// not exist: without CI the test skips, under CI=true it fails, and either
// way the message says why.
func TestUnavailable(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") != "" {
		pgtest.NewDatabase(t)
		t.Fatal("NewDatabase returned without a server")
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailable$", "-test.v")
		cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", "CI="+ci,
			pgtest.EnvURL+"=postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
		out, err := cmd.CombinedOutput()
		want := "--- SKIP"
		if ci == "true" {
			want = "--- FAIL"
			if err == nil {
				t.Errorf("CI=true: child passed:\n%s", out)
			}
		} else if err != nil {
			t.Errorf("CI unset: child failed: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "127.0.0.1") {
			t.Errorf("CI=%q: want %q and the reason in the output:\n%s", ci, want, out)
		}
	}
}

// TestServerStopStart: a private server refuses connections while stopped
// and serves the same database, with its data, after Start.
func TestServerStopStart(t *testing.T) {
	ps := pgtest.NewServer(t)
	url := ps.NewDatabase(t)
	ctx := t.Context()
	run := func(sql string) error { return pgtest.ExecURL(ctx, url, sql) }
	if err := run("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	ps.Stop(t)
	if err := run("SELECT 1"); err == nil {
		t.Fatal("a stopped server answered")
	}
	ps.Start(t)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("after Start: %v", err)
	}
	defer c.Close(ctx)
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 7 {
		t.Fatalf("after Start: %d, %v", x, err)
	}
}

// TestTool finds the client programs a backup needs beside the server.
func TestTool(t *testing.T) {
	for _, name := range []string{"pg_dump", "pg_restore", "pg_dumpall", "psql"} {
		p, err := pgtest.Tool(name)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
		out, err := exec.Command(p, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), name) {
			t.Fatalf("%s --version: %v\n%s", p, err, out)
		}
	}
	if _, err := pgtest.Tool("no-such-tool"); err == nil {
		t.Fatal("Tool found a program that does not exist")
	}
}
