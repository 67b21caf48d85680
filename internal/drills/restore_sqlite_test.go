//go:build drills

package drills

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// sqlite3CLI returns the path of the sqlite3 command-line shell, which
// the documented online backup of the embedded store runs. Without it the
// drill skips, except under CI=true, where it fails: .ci/run installs it.
func sqlite3CLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the SQLite backup drill needs the sqlite3 CLI (docs/operations.md, \"Back up\"), required under CI=true: %v", err)
		}
		t.Skipf("no sqlite3 CLI for the documented online backup: %v", err)
	}
	return p
}

// sqliteBackup copies the embedded store's database in dir online, as
// docs/operations.md ("Back up") tells an operator to: `sqlite3 ledger.db
// ".backup FILE"` beside the running service. It returns how long the
// copy took.
func sqliteBackup(t *testing.T, sqlite3, dir, file string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, sqlite3, filepath.Join(dir, "ledger.db"), ".backup '"+file+"'").CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %s .backup: %v\n%s", filepath.Join(dir, "ledger.db"), err, out)
	}
	return time.Since(start)
}

// restoreSQLite puts a backup of ledger.db into a fresh store directory,
// as docs/operations.md ("Restore") says, and returns the directory.
func restoreSQLite(t *testing.T, backup string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	b, err := os.ReadFile(backup)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "ledger.db"), b, 0o600)
	}
	if err != nil {
		t.Fatalf("couldn't restore %s: %v", backup, err)
	}
	return dir
}

// TestRestoreSQLite backs the embedded store up online with the sqlite3
// CLI, twice, once while the Guardian appends and once after with the
// service still running, and restores each copy into a fresh directory
// served with the ledger's own key directory. The restore of the quiet
// backup holds every acknowledged step, the same entries and the same
// checkpoint; the backup taken under load holds every step answered
// before it began and extends the checkpoint served before it. Each
// re-verifies green and verifies offline (auditRestored).
func TestRestoreSQLite(t *testing.T) {
	sqlite3 := sqlite3CLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := filepath.Join(t.TempDir(), "data")
	keys := Keygen(t, bin)
	ak, err := LoadAgentKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	live, quiet := filepath.Join(dir, "live.db"), filepath.Join(dir, "quiet.db")

	s := Serve(t, bin, "--db", src, "--keys", keys)
	const sessions, steps = 4, 300
	want := sessions * (steps + 1)
	tally, stop := Load{URL: s.URL, Keys: ak, Sessions: sessions, Steps: steps}.Start(ctx)
	waitFor(t, 30*time.Second, "answers before the backup", func() bool { return tally.Recorded() >= 150 })
	liveCheckpoint := checkpointBody(t, s)
	backupStart := time.Now()
	liveTook := sqliteBackup(t, sqlite3, src, live)
	waitFor(t, time.Minute, "the end of the load", func() bool { return len(tally.Answers()) == want })
	stop()
	for _, err := range tally.Errs() {
		t.Errorf("%v", err)
	}
	if recorded := tally.Recorded(); recorded != want {
		t.Fatalf("%d of %d steps recorded", recorded, want)
	}
	srcAnchored, _ := s.WaitAnchored(t, int64(tally.Recorded()))
	srcRV := s.Reverify(t)
	if !srcRV.Green() || srcRV.Entries != srcAnchored {
		t.Fatalf("the source ledger: re-verification %s, the log anchors %d", srcRV, srcAnchored)
	}
	srcCheckpoint := checkpointBody(t, s)
	quietTook := sqliteBackup(t, sqlite3, src, quiet)
	if !s.Ready() || checkpointBody(t, s) != srcCheckpoint {
		t.Fatalf("the source server after the online backup: ready %v\n%s", s.Ready(), s.Log())
	}

	t.Run("quiet", func(t *testing.T) {
		db := restoreSQLite(t, quiet)
		r := Serve(t, bin, "--db", db, "--keys", keys)
		if got := checkpointBody(t, r); got != srcCheckpoint {
			t.Fatalf("the restored ledger serves checkpoint\n%s\nthe source served\n%s", got, srcCheckpoint)
		}
		rv := r.Reverify(t)
		if !rv.Green() || rv.Entries != srcRV.Entries || rv.Sessions != srcRV.Sessions || r.LogSize(t) != srcAnchored {
			t.Fatalf("restored: re-verification %s, log %d; the source: %s, log %d", rv, r.LogSize(t), srcRV, srcAnchored)
		}
		rep := Check(t, tally.Answers(), r.ReadChains(t, tally.Sessions()))
		if rep.InLedger != rep.Answered || rep.Answered != want || rep.Duplicates != 0 || rep.Unexplained != 0 {
			t.Errorf("restored: %s", rep)
		}
		aud := auditRestored(t, r, db, keys, srcCheckpoint, tally.Sessions()[0])
		summary(t, "restore-sqlite", "sqlite3 .backup beside the running service after the load (%v), restored to a fresh directory: entries %d = %d, sessions %d = %d, log size %d = %d, same checkpoint; %s; re-verification %s; %s",
			quietTook.Round(time.Millisecond), rv.Entries, srcRV.Entries, rv.Sessions, srcRV.Sessions, srcAnchored, srcAnchored, rep, rv, aud)
		r.Stop(t)
	})

	t.Run("under-load", func(t *testing.T) {
		db := restoreSQLite(t, live)
		r := Serve(t, bin, "--db", db, "--keys", keys)
		logAtRestore := r.LogSize(t)
		before, after := 0, 0
		var answered []Answer
		for _, a := range tally.Answers() {
			switch {
			case a.Recorded() && a.Got.Before(backupStart):
				answered = append(answered, a)
				before++
			case a.Sent.After(backupStart.Add(liveTook)):
				after++
			}
		}
		if after == 0 {
			t.Errorf("the load ended before the backup did")
		}
		rep := Check(t, answered, r.ReadChains(t, tally.Sessions()))
		anchored, took := r.WaitAnchored(t, rep.Entries)
		rv := r.Reverify(t)
		if !rv.Green() || rv.Entries != anchored || rep.InLedger != before || rep.Duplicates != 0 {
			t.Fatalf("restored from the backup under load: %s; %d answered before the backup; re-verification %s; log %d", rep, before, rv, anchored)
		}
		aud := auditRestored(t, r, db, keys, liveCheckpoint, tally.Sessions()[0])
		summary(t, "restore-sqlite-under-load", "sqlite3 .backup during the load (%v; %d steps sent after it ended), restored to a fresh directory: %d steps answered before it began, %d in the restored ledger; %d of the source's %d entries; log %d at the restore, %d once the integrator caught up (%v); re-verification %s; %s",
			liveTook.Round(time.Millisecond), after, before, rep.InLedger, rep.Entries, srcRV.Entries, logAtRestore, anchored, took.Round(time.Millisecond), rv, aud)
		r.Stop(t)
	})
	s.Stop(t)
}
