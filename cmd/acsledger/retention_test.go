package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRetentionCommands runs retention, hold and erase --agent in process
// on an embedded store: bad input exits 2 naming the field, good input
// is stored and listed.
func TestRetentionCommands(t *testing.T) {
	ctx := context.Background()
	db := "sqlite:" + t.TempDir()
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"retention", "set", "--db", db, "--name", "r", "--period", "12h", "--reason", "x"}, "period: "},
		{[]string{"retention", "set", "--db", db, "--name", "r", "--period", "30d", "--reason", " "}, "reason: "},
		{[]string{"retention", "set", "--db", db, "--name", "r", "--period", "30d", "--reason", "x", "--format", "syslog"}, "scope.source_format: "},
		{[]string{"retention", "set", "--db", db, "--name", "r", "--period", "soon", "--reason", "x"}, "period: "},
		{[]string{"hold", "set", "--db", db, "--case", "c", "--agent", "a"}, "reason: "},
		{[]string{"hold", "set", "--db", db, "--case", "c", "--reason", "x"}, "scope: "},
		{[]string{"hold", "set", "--db", db, "--case", "c", "--reason", "x", "--from", "2026-03-02", "--until", "2026-03-01"}, "scope.until: "},
		{[]string{"hold", "set", "--db", db, "--case", "c", "--reason", "x", "--from", "March"}, "from: "},
		{[]string{"erase", "--db", db, "--agent", "a", "--reason", "x"}, "--until is required"},
		{[]string{"erase", "--db", db, "--agent", "a", "--until", "2026-03-01"}, "--reason is required"},
		{[]string{"erase", "--db", db, "--agent", "a", "--session", "s", "--until", "2026-03-01", "--reason", "x"}, "without --session"},
		{[]string{"hold", "release", "--db", db, "c"}, "reason: "},
		{[]string{"retention", "purge"}, "unknown retention subcommand"},
	} {
		if code, _, stderr := cli(c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, stderr, c.want)
		}
	}
	if code, out, _ := cli("retention", "list", "--db", db, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("rules after refusals: %d %s", code, out)
	}

	if code, out, errs := cli("retention", "set", "--db", db, "--name", "eu", "--period", "6mo", "--agent", "team-a/", "--reason", "EU AI Act", "--by", "ops"); code != 0 || !strings.Contains(out, `"period": "180d"`) {
		t.Fatalf("retention set: %d %s %s", code, out, errs)
	}
	if code, out, _ := cli("retention", "list", "--db", db); code != 0 || !strings.Contains(out, "eu") || !strings.Contains(out, "team-a/") {
		t.Fatalf("retention list: %d %s", code, out)
	}
	if code, out, errs := cli("hold", "set", "--db", db, "--case", "CASE-1", "--session", "s-1", "--session", "s-2", "--reason", "litigation", "--by", "legal"); code != 0 || !strings.Contains(out, `"case": "CASE-1"`) {
		t.Fatalf("hold set: %d %s %s", code, out, errs)
	}
	if code, _, errs := cli("hold", "set", "--db", db, "--case", "CASE-1", "--agent", "x", "--reason", "again"); code != 1 || !strings.Contains(errs, "standing hold") {
		t.Fatalf("second hold of a case: %d %s", code, errs)
	}
	if code, out, errs := cli("erase", "--db", db, "--agent", "team-a/", "--until", "2026-12-01T00:00:00Z", "--reason", "subject request", "--by", "dpo"); code != 0 || !strings.Contains(out, "erased 0 payloads") {
		t.Fatalf("erase --agent: %d %s %s", code, out, errs)
	}
	if code, out, _ := cli("hold", "list", "--db", db); code != 0 || !strings.Contains(out, "CASE-1") {
		t.Fatalf("hold list: %d %s", code, out)
	}
	if code, out, errs := cli("hold", "release", "--db", db, "--reason", "settled", "CASE-1"); code != 0 || !strings.Contains(out, `"release_reason": "settled"`) {
		t.Fatalf("hold release: %d %s %s", code, out, errs)
	}
	if code, out, _ := cli("hold", "list", "--db", db, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("standing holds after release: %d %s", code, out)
	}
	if code, out, errs := cli("retention", "sweep", "--db", db); code != 0 || !strings.Contains(out, "rule eu: erased 0 payloads") {
		t.Fatalf("retention sweep: %d %s %s", code, out, errs)
	}
	if code, out, _ := cli("retention", "delete", "--db", db, "eu"); code != 0 || !strings.Contains(out, `deleted retention rule "eu"`) {
		t.Fatalf("retention delete: %d %s", code, out)
	}
	if code, _, errs := cli("retention", "delete", "--db", db, "eu"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("delete a deleted rule: %d %s", code, errs)
	}
}
