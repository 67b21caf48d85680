package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
