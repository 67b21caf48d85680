package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/ledger/retention/retentiontest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// seedParams appends n Guardian steps with params over 16 sessions of
// agent "crash-agent", recorded two days ago (the store's clock), and a
// one-day rule that covers every one.
func seedParams(t *testing.T, db string, n int) {
	t.Helper()
	retentiontest.SeedExpired(t, db, n, 16, "sweep", "crash-agent")
	st, err := storeopen.Open(context.Background(), db, ledger.Options{Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutRule(context.Background(), ledger.Rule{Name: "one-day", Period: 24 * time.Hour, Reason: "test", SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionSweepKill9 kills `acsledger retention sweep` with SIGKILL
// in the middle of a sweep over a few thousand payloads: each payload is
// either erased with its erasures row naming the run, or untouched; the
// next sweep records the run cut short from those rows and erases the
// rest.
func TestRetentionSweepKill9(t *testing.T) {
	storeKinds(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		db := retentiontest.NewStore(t, kind)
		const n = 3000
		seedParams(t, db, n)
		st, err := storeopen.Open(ctx, db, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()

		cmd := exec.Command(binary, "retention", "sweep", "--db", db, "--batch", "20", "--pause", "5ms")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		erasedBy := func() (string, int64) {
			runs, err := st.UnfinishedRuns(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 {
				return "", 0
			}
			rs, err := st.RunErasures(ctx, runs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			var c int64
			for _, r := range rs {
				c += r.Count
			}
			return runs[0].ID, c
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if _, c := erasedBy(); c >= 300 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sweep erased nothing in a minute: %s", out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		run, killedAt := erasedBy()
		if run == "" || killedAt >= n {
			t.Fatalf("after the kill: run %q erased %d of %d (the sweep ended before the kill)", run, killedAt, n)
		}

		// Each payload: stored, or erased with its record naming the run.
		erased := int64(0)
		for s := range 16 {
			sid := fmt.Sprintf("sweep-%02d", s)
			for e, err := range ledger.AllEntries(ctx, st, sid) {
				if err != nil {
					t.Fatal(err)
				}
				_, err := st.Request(ctx, sid, e.Position)
				var ee *ledger.ErasedError
				switch {
				case err == nil:
				case errors.As(err, &ee):
					erased++
					if !strings.Contains(ee.Erasure.Reason, `retention rule "one-day"`) {
						t.Fatalf("%s/%d erased with %+v", sid, e.Position, ee.Erasure)
					}
				default:
					t.Fatalf("%s/%d: %v", sid, e.Position, err)
				}
			}
		}
		if erased != killedAt {
			t.Fatalf("%d payloads erased, the run's records say %d", erased, killedAt)
		}

		// The next sweep records the run cut short and finishes the job.
		b, err := exec.Command(binary, "retention", "sweep", "--db", db).CombinedOutput()
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("erased %d payloads", killedAt)) || !strings.Contains(string(b), "cut short") ||
			!strings.Contains(string(b), fmt.Sprintf("erased %d payloads of ", n-killedAt)) {
			t.Fatalf("second sweep: %v\n%s", err, b)
		}
		if runs, err := st.UnfinishedRuns(ctx); err != nil || len(runs) != 0 {
			t.Fatalf("unfinished runs after the second sweep: %v %v", runs, err)
		}
		recovered := 0
		for e, err := range ledger.AllEntries(ctx, st, retention.SessionID(time.Now())) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(e.Content), `"recovered":true`) && strings.Contains(string(e.Content), run) {
				recovered++
			}
		}
		if recovered != 1 {
			t.Fatalf("%d records of the run cut short in the admin session", recovered)
		}
		t.Logf("killed after %d of %d payloads erased", killedAt, n)
	})
}
