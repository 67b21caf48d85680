//go:build drills

package drills

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// pgTool runs a PostgreSQL client program from beside the server binaries
// and fails t if it exits non-zero.
func pgTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	p, err := pgtest.Tool(name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	out, err := exec.Command(p, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkpointBody is a checkpoint's origin, size and root hash: what two
// servers of one log must agree on (signature lines may be re-signed).
func checkpointBody(t *testing.T, s *Server) string {
	t.Helper()
	code, body := s.Do(t, http.MethodGet, "/checkpoint", nil)
	if code != http.StatusOK {
		t.Fatalf("/checkpoint: %d %s", code, body)
	}
	head, _, _ := strings.Cut(string(body), "\n\n")
	return head
}

var (
	verifierOnce sync.Once
	verifierBin  string
	verifierErr  error
)

// auditor returns an Auditor holding the public keys of the key directory
// keys, building acsverify beside acsledger on first use.
func auditor(t *testing.T, keys string) *Auditor {
	t.Helper()
	verifierOnce.Do(func() { verifierBin, verifierErr = BuildVerifier(filepath.Dir(bin)) })
	if verifierErr != nil {
		t.Fatal(verifierErr)
	}
	return NewAuditor(t, verifierBin, bin, keys)
}

// audited is what an auditor found of a restored ledger, offline.
type audited struct {
	Offline
	// Reverified is the restored server's re-verification run right
	// after the export: its counts are the bundles'.
	Reverified Reverification
	// Tampered is the position of the entry changed in a copy of a
	// bundle, which acsverify rejected naming it.
	Tampered int
	// by is the auditor that checked.
	by *Auditor
}

func (a audited) String() string {
	return fmt.Sprintf("%s (the server's re-verification right after: %d sessions, %d entries); a copy of a bundle with one byte of entry %d changed: acsverify exit 1, entry_hash_mismatch at that entry",
		a.Offline, a.Reverified.Sessions, a.Reverified.Entries, a.Tampered)
}

// auditRestored checks the restored ledger r (store db) as an auditor
// would, offline: every session exported and verified by acsverify with
// the public keys of keys and against the checkpoint body before, held
// before the backup (and the bundles earlier exported then, by session:
// Auditor.VerifyLedger); as many sessions and entries as the server's own
// re-verification run right after counts; and a copy of the bundle of
// session with one entry byte changed rejected, naming the entry.
func auditRestored(t *testing.T, r *Server, db, keys, before string, earlier map[string]string, session string) audited {
	t.Helper()
	// Listing the sessions is a read the access log records: let the log
	// anchor that record before the export, or its bundle ends
	// not_anchored.
	sessions := r.Sessions(t)
	r.WaitAnchored(t, 0)
	aud := auditor(t, keys)
	a := audited{Offline: aud.VerifyLedger(t, sessions, db, keys, before, earlier), by: aud}
	a.Reverified = r.Reverify(t)
	if a.Verified != a.Sessions || !a.Reverified.Green() || int64(a.Sessions) != a.Reverified.Sessions || a.Entries != a.Reverified.Entries {
		t.Errorf("offline: %s; the restored server re-verifies %s", a.Offline, a.Reverified)
	}
	a.Tampered, _ = aud.CheckTamper(t, a.Bundles[session])
	return a
}

// restoreSource is a ledger loaded for a restore drill, and what it held
// once its load ended.
type restoreSource struct {
	keys  string
	tally *Tally
	// backupStart is when the backup taken under load began, and
	// liveCheckpoint the checkpoint served just before it: the one an
	// auditor held from before that backup.
	backupStart    time.Time
	liveCheckpoint string
	// anchored, rv and checkpoint are the source's log size,
	// re-verification and checkpoint body after the load.
	anchored   int64
	rv         Reverification
	checkpoint string
	// earlier are the bundles of the load's sessions exported after the
	// load, before the quiet backup, by session: what an auditor holds.
	earlier map[string]string
}

// restoreSessions and restoreSteps are the restore drills' load: each
// session's sessionStart and its steps are 1,204 entries.
const restoreSessions, restoreSteps = 4, 300

// loadForRestore runs the restore drills' load on s (store db, key
// directory keys), calls backup once 150 steps are answered, while the
// load runs, waits for the end of the load and for the log to anchor it,
// exports the bundles of the load's sessions, and returns what the source
// holds.
func loadForRestore(t *testing.T, s *Server, db, keys string, backup func()) restoreSource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ak := MustLoadAgentKeys(t, keys)
	want := restoreSessions * (restoreSteps + 1)
	src := restoreSource{keys: keys}
	var stop func()
	src.tally, stop = Load{URL: s.URL, Keys: ak, Sessions: restoreSessions, Steps: restoreSteps}.Start(ctx)
	waitFor(t, 30*time.Second, "answers before the backup", func() bool { return src.tally.Recorded() >= 150 })
	src.liveCheckpoint = checkpointBody(t, s)
	src.backupStart = time.Now()
	backup()
	waitFor(t, time.Minute, "the end of the load", func() bool { return len(src.tally.Answers()) == want })
	stop()
	for _, err := range src.tally.Errs() {
		t.Errorf("%v", err)
	}
	if recorded := src.tally.Recorded(); recorded != want {
		t.Fatalf("%d of %d steps recorded", recorded, want)
	}
	src.anchored, _ = s.WaitAnchored(t, int64(want))
	src.rv = s.Reverify(t)
	if !src.rv.Green() || src.rv.Entries != src.anchored {
		t.Fatalf("the source ledger: re-verification %s, the log anchors %d", src.rv, src.anchored)
	}
	src.checkpoint = checkpointBody(t, s)
	src.earlier = map[string]string{}
	aud, dir := auditor(t, keys), t.TempDir()
	for i, id := range src.tally.Sessions() {
		src.earlier[id] = filepath.Join(dir, fmt.Sprintf("earlier-%d.json", i))
		aud.Export(t, db, keys, id, 0, src.earlier[id])
	}
	return src
}

// checkQuietRestore checks r, serving store db restored from a backup
// taken after the load: the same checkpoint, entries and sessions as the
// source, every answered step in it, the offline audit, and new sessions
// served on it. It returns the figures for the summary line.
func checkQuietRestore(t *testing.T, r *Server, db string, src restoreSource) string {
	t.Helper()
	if got := checkpointBody(t, r); got != src.checkpoint {
		t.Fatalf("the restored ledger serves checkpoint\n%s\nthe source served\n%s", got, src.checkpoint)
	}
	rv := r.Reverify(t)
	if !rv.Green() || rv.Entries != src.rv.Entries || rv.Sessions != src.rv.Sessions || r.LogSize(t) != src.anchored {
		t.Fatalf("restored: re-verification %s, log %d; the source: %s, log %d", rv, r.LogSize(t), src.rv, src.anchored)
	}
	rep := Check(t, src.tally.Answers(), r.ReadChains(t, src.tally.Sessions()))
	if rep.InLedger != rep.Answered || rep.Duplicates != 0 || rep.Unexplained != 0 {
		t.Errorf("restored: %s", rep)
	}
	aud := auditRestored(t, r, db, src.keys, src.checkpoint, src.earlier, src.tally.Sessions()[0])
	return fmt.Sprintf("entries %d = %d, sessions %d = %d, log size %d = %d, same checkpoint; %s; re-verification %s; %s; %s",
		rv.Entries, src.rv.Entries, rv.Sessions, src.rv.Sessions, src.anchored, src.anchored, rep, rv, aud, servesOn(t, r, src.keys))
}

// checkRestoreUnderLoad checks r, serving store db restored from the
// backup taken while the load ran: every step answered before the backup
// began is in it, and it re-verifies and audits green once its integrator
// has anchored what the log had not taken in at the backup. It returns
// the figures for the summary line.
func checkRestoreUnderLoad(t *testing.T, r *Server, db string, src restoreSource) string {
	t.Helper()
	logAtRestore := r.LogSize(t)
	before, after := 0, 0
	var answered []Answer
	for _, a := range src.tally.Answers() {
		switch {
		case a.Recorded() && a.Got.Before(src.backupStart):
			answered = append(answered, a)
			before++
		case a.Sent.After(src.backupStart):
			after++
		}
	}
	if after == 0 {
		t.Errorf("the load ended before the backup began")
	}
	rep := Check(t, answered, r.ReadChains(t, src.tally.Sessions()))
	anchored, took := r.WaitAnchored(t, rep.Entries)
	rv := r.Reverify(t)
	if !rv.Green() || rv.Entries != anchored || rep.InLedger != before || rep.Duplicates != 0 {
		t.Fatalf("restored from the backup under load: %s; %d answered before the backup; re-verification %s; log %d", rep, before, rv, anchored)
	}
	first := src.tally.Sessions()[0]
	aud := auditRestored(t, r, db, src.keys, src.liveCheckpoint, nil, first)
	// The backup is older than the bundle an auditor exported after the
	// load: acsverify shows the restored session is not that bundle's.
	older := aud.by.CheckNotExtending(t, aud.Bundles[first], src.earlier[first], "truncated")
	return fmt.Sprintf("%d steps sent after it began; %d steps answered before it began, %d in the restored ledger; %d of the source's %d entries; log %d at the restore, %d once the integrator caught up (%v); re-verification %s; %s; against the bundle of a session exported after the load, acsverify exit 1: %s",
		after, before, rep.InLedger, rep.Entries, src.rv.Entries, logAtRestore, anchored, took.Round(time.Millisecond), rv, aud, strings.Join(slices.Compact(slices.Sorted(slices.Values(older))), ", "))
}

// servesOn runs a short load of new sessions on the restored server r:
// every step must be answered with a head the ledger then holds, and the
// whole ledger must still re-verify.
func servesOn(t *testing.T, r *Server, keys string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ak := MustLoadAgentKeys(t, keys)
	const sessions, steps = 2, 50
	want := sessions * (steps + 1)
	tally, stop := Load{URL: r.URL, Keys: ak, Sessions: sessions, Steps: steps}.Start(ctx)
	waitFor(t, time.Minute, "the load on the restored server", func() bool { return len(tally.Answers()) == want })
	stop()
	for _, err := range tally.Errs() {
		t.Errorf("on the restored server: %v", err)
	}
	rep := Check(t, tally.Answers(), r.ReadChains(t, tally.Sessions()))
	r.WaitAnchored(t, 0)
	rv := r.Reverify(t)
	if rep.Answered != want || rep.InLedger != want || !rv.Green() {
		t.Fatalf("serving on the restored ledger: %s; re-verification %s", rep, rv)
	}
	return fmt.Sprintf("then served %d new steps: %d in the ledger, re-verification %s", want, rep.InLedger, rv)
}

// TestRestore backs a PostgreSQL ledger up with pg_dump (custom format)
// twice, once while the Guardian appends and once after, and restores each
// to a fresh PostgreSQL server as docs/operations.md tells an operator to:
// the cluster's roles first (pg_dumpall --roles-only), then pg_restore,
// then `acsledger serve` on the restored database with the ledger's own
// key directory. The restore of the quiet backup holds the same entries,
// serves the same checkpoint and takes new sessions; the backup taken
// under load restores to a consistent ledger holding every step answered
// before the dump began, whose integrator anchors what the log had not yet
// taken in. Each re-verifies green across the whole ledger, and verifies
// offline: every session's bundle, exported from the restored store,
// checked by acsverify with the key directory's public keys and against
// the checkpoint taken before the dump (auditRestored); the quiet restore
// also extends the bundles exported before its dump, which the restore
// of the older dump, taken under load, does not.
func TestRestore(t *testing.T) {
	src := pgtest.NewServer(t)
	db := src.NewDatabase(t)
	Run(t, bin, "migrate", "--db", db)
	keys := Keygen(t, bin)
	dir := t.TempDir()
	live, quiet, roles := filepath.Join(dir, "live.dump"), filepath.Join(dir, "quiet.dump"), filepath.Join(dir, "roles.sql")

	s := Serve(t, bin, "--db", db, "--keys", keys)
	loaded := loadForRestore(t, s, db, keys, func() {
		pgTool(t, "pg_dump", "--format=custom", "--file", live, "--dbname", db)
	})
	s.Stop(t)
	pgTool(t, "pg_dump", "--format=custom", "--file", quiet, "--dbname", db)
	// Roles (and their memberships) are the cluster's, not the
	// database's: pg_dump leaves them out.
	pgTool(t, "pg_dumpall", "--roles-only", "--no-role-passwords", "--file", roles, "--dbname", db)

	dst := pgtest.NewServer(t)
	restore := func(t *testing.T, dump string) (*Server, string) {
		t.Helper()
		url := dst.NewDatabase(t)
		// The fresh server has its superuser already: psql reports that
		// one CREATE ROLE as an error and carries on.
		pgTool(t, "psql", "--quiet", "--no-psqlrc", "--file", roles, "--dbname", url)
		pgTool(t, "pg_restore", "--exit-on-error", "--dbname", url, dump)
		return Serve(t, bin, "--db", url, "--keys", keys), url
	}

	checkRestores(t, loaded, "restored to a fresh server",
		restoreCase{"restore-quiet", "pg_dump after the load", func(t *testing.T) (*Server, string) { return restore(t, quiet) }},
		restoreCase{"restore-under-load", "pg_dump during the load", func(t *testing.T) (*Server, string) { return restore(t, live) }})
}

// restoreCase is one restore of a restore drill: the drill's name in the
// summary, how its backup was taken, and how the backup is served.
type restoreCase struct {
	drill, how string
	serve      func(t *testing.T) (*Server, string)
}

// checkRestores serves the backup taken after the load (quiet) and the one
// taken during it (underLoad), checks each against what the load left,
// and summarizes each as "<how>, <restored>: <what the check found>".
func checkRestores(t *testing.T, loaded restoreSource, restored string, quiet, underLoad restoreCase) {
	for _, tc := range []struct {
		name  string
		c     restoreCase
		check func(t *testing.T, r *Server, db string, src restoreSource) string
	}{
		{"quiet", quiet, checkQuietRestore},
		{"under-load", underLoad, checkRestoreUnderLoad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, url := tc.c.serve(t)
			summary(t, tc.c.drill, "%s, %s: %s", tc.c.how, restored, tc.check(t, r, url, loaded))
			r.Stop(t)
		})
	}
}
