package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
)

func TestUsageAndExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "usage: acsledger"},
		{"help", []string{"help"}, 0, "migrate"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"serve", "--nope"}, 2, "flag provided but not defined: -nope"},
		{"stray argument", []string{"migrate", "extra"}, 2, `unexpected argument "extra"`},
		{"bad store", []string{"migrate", "--db", "sqlite:"}, 1, "needs a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
				t.Fatalf("exit %d, output %q; want exit %d mentioning %q", code, stdout.String()+stderr.String(), tc.code, tc.want)
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"migrate", "--db", dir}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err != nil {
			t.Fatalf("migrate left no database file: %v", err)
		}
		if !strings.Contains(stdout.String(), "migrated "+dir) {
			t.Fatalf("stdout %q", stdout.String())
		}
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		for range 2 { // a second run finds nothing to do and still succeeds
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"migrate", "--db", url}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
		}
	})
}

// TestUsageListsEveryCommand holds the printed usage and the command's doc
// comment (what go doc and a reader of main.go see) to the commands run
// dispatches: each must name every one of them.
func TestUsageListsEveryCommand(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("main.go has no package doc comment")
	}
	doc := f.Doc.Text()
	cmds := commands()
	if len(cmds) < 11 {
		t.Fatalf("commands() lists %d commands, want at least the 11 documented", len(cmds))
	}
	for _, c := range cmds {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.name) + ` +\S`).MatchString(stderr.String()) {
			t.Errorf("the usage does not list %q:\n%s", c.name, stderr.String())
		}
		if !regexp.MustCompile(`(?m)^\tacsledger ` + regexp.QuoteMeta(c.name) + `( |$)`).MatchString(doc) {
			t.Errorf("the doc comment of main.go does not list 'acsledger %s'", c.name)
		}
	}
}
