package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/ledger/retention/retentiontest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// TestRetentionSweepWithoutEraserRole: `retention sweep` and `erase
// --agent` with the service's login, which cannot SET ROLE
// acsledger_eraser, fail naming the role and record nothing (no run row,
// no admin entry, no erasure); the next sweep by the owner erases every
// payload and records no run "recovered".
func TestRetentionSweepWithoutEraserRole(t *testing.T) {
	ctx := context.Background()
	owner := retentiontest.NewStore(t, "postgres")
	const n = 40
	seedParams(t, owner, n)
	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The role is cluster-wide; writerLogin's tests give it the same login.
	if _, err := conn.Exec(ctx, "ALTER ROLE acsledger_writer LOGIN PASSWORD 'writer'"); err != nil {
		t.Fatal(err)
	}
	writer := withUser(t, owner, "acsledger_writer", "writer")

	counts := func() (runs, admin, erased int) {
		t.Helper()
		for _, q := range []struct {
			sql string
			out *int
		}{
			{"SELECT count(*) FROM retention_runs", &runs},
			{"SELECT count(*) FROM sessions WHERE agent_id = '" + retention.AgentID + "'", &admin},
			{"SELECT count(*) FROM erasures", &erased},
		} {
			if err := conn.QueryRow(ctx, q.sql).Scan(q.out); err != nil {
				t.Fatal(err)
			}
		}
		return runs, admin, erased
	}
	runs0, admin0, _ := counts() // seedParams put the rule; its record is the owner's
	for _, args := range [][]string{
		{"retention", "sweep", "--db", writer},
		{"erase", "--db", writer, "--agent", "crash-agent", "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--reason", "test"},
	} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if code := exitCode(err); code != 1 || !strings.Contains(string(out), "acsledger_eraser") || !strings.Contains(string(out), "nothing was recorded") {
			t.Fatalf("%s as the writer login: exit %d, want 1 naming acsledger_eraser:\n%s", args[:2], code, out)
		}
		if strings.Contains(string(out), "writer@") || strings.Contains(string(out), ":writer") {
			t.Fatalf("the output shows the login's password:\n%s", out)
		}
		if runs, admin, erased := counts(); runs != runs0 || admin != admin0 || erased != 0 {
			t.Fatalf("after %s as the writer login: %d runs (before %d), %d admin sessions (before %d), %d erasures: want nothing recorded",
				args[:2], runs, runs0, admin, admin0, erased)
		}
	}

	out, err := exec.Command(binary, "retention", "sweep", "--db", owner).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "erased 40 payloads") || strings.Contains(string(out), "cut short") {
		t.Fatalf("the owner's sweep: %v\n%s", err, out)
	}
	if _, _, erased := counts(); erased != n {
		t.Fatalf("%d erasures after the owner's sweep, want %d", erased, n)
	}
	st, err := storeopen.Open(ctx, owner, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if runs, err := st.UnfinishedRuns(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("unfinished runs: %v %v", runs, err)
	}
	sweeps := 0
	for e, err := range ledger.AllEntries(ctx, st, retention.SessionID(time.Now())) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(e.Content), `"recovered"`) {
			t.Fatalf("the admin session records a run as recovered: %s", e.Content)
		}
		if strings.Contains(string(e.Content), retention.StepSweep) {
			sweeps++
		}
	}
	if sweeps != 1 {
		t.Fatalf("%d sweep records in the admin session, want the owner's one", sweeps)
	}
}
