//go:build drills

package drills

import (
	"context"
	"fmt"
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
// served with the ledger's own key directory. The checks are TestRestore's:
// the quiet backup's restore holds every acknowledged step, the same
// entries and checkpoint, and takes new sessions; the backup under load
// holds every step answered before it began and extends the checkpoint
// served before it; each re-verifies green and verifies offline.
func TestRestoreSQLite(t *testing.T) {
	sqlite3 := sqlite3CLI(t)
	src := filepath.Join(t.TempDir(), "data")
	keys := Keygen(t, bin)
	dir := t.TempDir()
	live, quiet := filepath.Join(dir, "live.db"), filepath.Join(dir, "quiet.db")

	s := Serve(t, bin, "--db", src, "--keys", keys)
	var liveTook time.Duration
	loaded := loadForRestore(t, s, src, keys, func() { liveTook = sqliteBackup(t, sqlite3, src, live) })
	quietTook := sqliteBackup(t, sqlite3, src, quiet)
	if !s.Ready() || checkpointBody(t, s) != loaded.checkpoint {
		t.Fatalf("the source server after the online backup: ready %v\n%s", s.Ready(), s.Log())
	}
	s.Stop(t)

	serve := func(backup string) func(t *testing.T) (*Server, string) {
		return func(t *testing.T) (*Server, string) {
			db := restoreSQLite(t, backup)
			return Serve(t, bin, "--db", db, "--keys", keys), db
		}
	}
	checkRestores(t, loaded, "restored to a fresh directory",
		restoreCase{"restore-sqlite", fmt.Sprintf("sqlite3 .backup beside the running service after the load (%v)", quietTook.Round(time.Millisecond)), serve(quiet)},
		restoreCase{"restore-sqlite-under-load", fmt.Sprintf("sqlite3 .backup during the load (%v)", liveTook.Round(time.Millisecond)), serve(live)})
}
