//go:build drills

package failover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/drills"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/verify"
)

// bin is the acsledger command the drill runs, built by TestMain as it
// ships (without -race).
var bin string

func TestMain(m *testing.M) { drills.Main(m, &bin) }

// The drill's phases are bounded so that it ends well within three
// minutes on a loaded machine, or fails saying which phase stalled.
const (
	agents        = 8
	warmAcks      = 150 // acknowledged decisions before the pre-failover checkpoint
	outage        = time.Second
	afterAcks     = 150 // acknowledged decisions after the promotion
	phaseDeadline = 40 * time.Second
	// maxSteps bounds each agent's steps far above what the phases need:
	// the drill stops the load once it has seen enough.
	maxSteps = 100_000
)

// calls are the tool calls the agents make: allowed and denied ones.
var calls = []any{
	toolCall("read_file", "path", "internal/parser/lexer.go"),
	toolCall("bash", "command", "go test ./... -count=1"),
	toolCall("bash", "command", "rm -rf / --no-preserve-root"),
	toolCall("list_directory", "path", "docs"),
}

func toolCall(tool, arg, value string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": tool}, "arguments": map[string]any{arg: map[string]any{
		"value": value, "provenance": map[string]any{"provenance_id": "p-" + arg, "origin": "agent_generated"}}}}
}

// TestFailover kills the primary under load, promotes the synchronous
// standby, and checks that nothing acknowledged was lost and that the
// Merkle log goes on from its last checkpoint.
func TestFailover(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()

	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "standby1")
	primary.SetSynchronous(t, "standby1")
	db := primary.NewDatabase(t)
	// Both servers, the writable one chosen at every connection; a host
	// that does not answer is given up after connect_timeout seconds.
	multi := pgtest.Hosts(t, db, primary, standby) + "&target_session_attrs=read-write&connect_timeout=5"
	onStandby := pgtest.Hosts(t, db, standby)

	keys := drills.Keygen(t, bin)
	drills.Run(t, bin, "migrate", "--db", db)
	srv := drills.Serve(t, bin, "--db", multi, "--keys", keys)
	agentKeys := drills.MustLoadAgentKeys(t, keys)
	logPolicy := drills.LogPolicy(t, bin, keys)

	// Load: agents sessions, each sending tool calls one after the other.
	// A step the ledger could not take is answered at once (the deny
	// posture); the agent then waits a little, as a real one backs off,
	// and goes on with its next step.
	tally, stopLoad := drills.Load{URL: srv.URL, Keys: agentKeys, Sessions: agents, Steps: maxSteps, Calls: calls, KeepGoing: true, BackOff: true}.Start(ctx)
	defer stopLoad()

	waitFor(t, "acknowledged decisions before the failover", func() bool {
		if errs := tally.Errs(); len(errs) > 0 {
			t.Fatalf("before the failover: %v\n%s", errs, srv.Log())
		}
		return tally.Recorded() >= warmAcks
	})
	var before verify.Checkpoint
	waitFor(t, "a checkpoint before the failover", func() bool {
		before = srv.Checkpoint(t, logPolicy)
		return before.Size > 0
	})
	// A commit is visible on the primary a moment before the standby has
	// it; an acknowledgement after the checkpoint was read proves it
	// replicated (WAL is flushed in order).
	seen := tally.Recorded()
	waitFor(t, "an acknowledgement after the checkpoint", func() bool { return tally.Recorded() > seen })

	ackedAtKill := tally.Recorded()
	killedAt := time.Now()
	primary.Kill(t)
	time.Sleep(outage)
	promotedAt := time.Now()
	standby.Promote(t)
	ackedAtPromote := tally.Recorded()
	waitFor(t, "acknowledged decisions after the promotion", func() bool { return tally.Recorded() >= ackedAtPromote+afterAcks })
	stopLoad()
	firstAck := tally.FirstRecordedAfter(promotedAt)
	if !srv.Ready() {
		t.Errorf("/readyz after the promotion does not answer 200\n%s", srv.Log())
	}

	// Every leaf integrated: the log's newest checkpoint covers every entry
	// of the new primary.
	conn, err := pgx.Connect(ctx, onStandby)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var stored uint64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM entries").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var after verify.Checkpoint
	waitFor(t, "the log to integrate every entry", func() bool {
		after = srv.Checkpoint(t, logPolicy)
		return after.Size >= stored
	})

	// Zero acknowledged decisions lost: each signed chain_hash is the
	// entry_hash of its step on the new primary. A step answered without
	// a head (the deny posture during the outage) recorded nothing; one
	// without a signed answer failed.
	var acks []drills.Answer
	unrecorded, failed := 0, 0
	for _, a := range tally.Answers() {
		switch {
		case a.Recorded():
			acks = append(acks, a)
		case a.Err != nil:
			failed++
		default:
			unrecorded++
		}
	}
	found := 0
	for _, a := range acks {
		var h []byte
		err := conn.QueryRow(ctx, "SELECT entry_hash FROM entries WHERE session_id = $1 AND step_id = $2", a.Session, a.RequestID).Scan(&h)
		switch {
		case err == pgx.ErrNoRows:
			t.Errorf("acknowledged decision lost: session %s step %s (chain_hash %s)", a.Session, a.RequestID, a.ChainHash)
		case err != nil:
			t.Fatal(err)
		case fmt.Sprintf("%x", h) != a.ChainHash:
			t.Errorf("session %s step %s: stored entry_hash %x, the signed answer said %s", a.Session, a.RequestID, h, a.ChainHash)
		default:
			found++
		}
	}
	// Steps committed while their answers were in flight (the primary died
	// between its commit and its answer) are in the ledger without an
	// acknowledgement; they are reported, not lost.
	sessions := tally.Sessions()
	var sessionEntries int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM entries WHERE session_id = ANY($1)", sessions).Scan(&sessionEntries); err != nil {
		t.Fatal(err)
	}
	unacked := sessionEntries - len(acks)

	// Every session's chain, signatures and log inclusion verify on the
	// new primary.
	for _, id := range sessions {
		var rep struct {
			Verified bool              `json:"verified"`
			Entries  int               `json:"entries"`
			Findings []json.RawMessage `json:"findings"`
		}
		srv.GetJSON(t, "/api/v1/sessions/"+id+"/verify", &rep)
		if !rep.Verified || rep.Entries == 0 {
			t.Errorf("session %s does not verify after the failover: %d entries, findings %s", id, rep.Entries, rep.Findings)
		}
	}

	// The log goes on from its last checkpoint: the new tree extends the
	// one signed before the failover.
	if after.Size <= before.Size {
		t.Fatalf("no checkpoint after the failover: size %d, before %d", after.Size, before.Size)
	}
	if err := srv.VerifyConsistency(t, before, after); err != nil {
		t.Errorf("checkpoint %d after the failover does not extend checkpoint %d before it: %v", after.Size, before.Size, err)
	}

	took := time.Since(began)
	t.Logf("failover: acknowledged %d, found %d, lost %d", len(acks), found, len(acks)-found)
	t.Logf("failover: %d acknowledged before the kill, %d after the promotion; %d committed without an answer; %d steps answered without a commit during the outage, %d failed",
		ackedAtKill, len(acks)-ackedAtPromote, unacked, unrecorded, failed)
	t.Logf("failover: service answering with commits again %v after pg_ctl promote (%v after kill -9)", firstAck.Sub(promotedAt).Round(time.Millisecond), firstAck.Sub(killedAt).Round(time.Millisecond))
	t.Logf("failover: checkpoint %d before, %d after; consistency proof verified; %d sessions verified", before.Size, after.Size, len(sessions))
	t.Logf("failover: drill took %v", took.Round(time.Second))
	if len(acks) != found {
		t.Fatalf("%d acknowledged decisions lost", len(acks)-found)
	}
	if took > 3*time.Minute {
		t.Errorf("the drill took %v, over its 3-minute bound", took)
	}
	srv.Stop(t)
}

// waitFor polls cond until it holds, failing the test after phaseDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	drills.WaitFor(t, phaseDeadline, 50*time.Millisecond, what, cond)
}
