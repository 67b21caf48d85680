//go:build drills

package drills

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestRestoreBaseBackup backs a PostgreSQL ledger up physically with
// pg_basebackup, twice, once while the Guardian appends and once after
// with the service still running, and starts each backup as a new
// PostgreSQL server (the whole cluster: roles come with it) served with
// the ledger's own key directory, as docs/operations.md ("Back up",
// "Restore") describes. The checks are TestRestore's: the quiet backup's
// restore holds every acknowledged step, the same entries and checkpoint,
// and takes new sessions; the backup under load holds every step answered
// before it began and extends the checkpoint served before it; each
// re-verifies green and verifies offline.
func TestRestoreBaseBackup(t *testing.T) {
	primary := pgtest.NewPrimary(t)
	db := primary.NewDatabase(t)
	Run(t, bin, "migrate", "--db", db)
	keys := Keygen(t, bin)

	s := Serve(t, bin, "--db", db, "--keys", keys)
	var live *pgtest.BaseBackup
	var liveTook time.Duration
	loaded := loadForRestore(t, s, db, keys, func() {
		start := time.Now()
		live = primary.BaseBackup(t)
		liveTook = time.Since(start)
	})
	start := time.Now()
	quiet := primary.BaseBackup(t)
	quietTook := time.Since(start)
	if !s.Ready() || checkpointBody(t, s) != loaded.checkpoint {
		t.Fatalf("the source server after the base backup: ready %v\n%s", s.Ready(), s.Log())
	}
	s.Stop(t)
	// restore starts a backup as a new server and serves the ledger's
	// database on it: the same database name, on the new server's port.
	restore := func(t *testing.T, b *pgtest.BaseBackup) (*Server, string) {
		t.Helper()
		pg := b.Start(t)
		url := strings.Replace(db, primary.Addr(), pg.Addr(), 1)
		return Serve(t, bin, "--db", url, "--keys", keys), url
	}

	checkRestores(t, loaded, "started as a new server",
		restoreCase{"restore-basebackup", fmt.Sprintf("pg_basebackup beside the running service after the load (%v)", quietTook.Round(time.Millisecond)), func(t *testing.T) (*Server, string) { return restore(t, quiet) }},
		restoreCase{"restore-basebackup-under-load", fmt.Sprintf("pg_basebackup during the load (%v)", liveTook.Round(time.Millisecond)), func(t *testing.T) (*Server, string) { return restore(t, live) }})
}
