//go:build drills

package patroni_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/drills"
	"github.com/acsledger/acsledger/verify"
)

// bin is the acsledger command the drills run, built by TestMain.
var bin string

func TestMain(m *testing.M) { drills.Main(m, &bin) }

// Each drill's phases are bounded: the whole drill ends well within two
// minutes on a loaded machine, or fails naming the phase that stalled.
const (
	agents        = 8
	warmAcks      = 150 // acknowledged decisions before the fault
	afterAcks     = 150 // acknowledged decisions on the new leader
	phaseDeadline = 60 * time.Second
	maxSteps      = 100_000
)

// calls are the agents' tool calls: one the baseline policy allows and
// one it denies, so that both kinds of recorded answer cross the failover.
var calls = []any{
	toolCall("read_file", "path", "internal/parser/lexer.go"),
	toolCall("bash", "command", "rm -rf / --no-preserve-root"),
}

func toolCall(tool, arg, value string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": tool}, "arguments": map[string]any{arg: map[string]any{
		"value": value, "provenance": map[string]any{"provenance_id": "p-" + arg, "origin": "agent_generated"}}}}
}

// TestPatroniKillPostgres kills the leader's postmaster with SIGKILL.
// Patroni on the leader sees its PostgreSQL gone and, with
// primary_start_timeout 0, gives up the leader key rather than restart it
// in place; the synchronous standby's Patroni promotes it. The old leader
// comes back as a replica of the new one.
func TestPatroniKillPostgres(t *testing.T) {
	runDrill(t, "patroni-kill9", func(t *testing.T, c *Cluster, leader *Node) func() {
		leader.KillPostgres(t)
		return nil
	})
}

// TestPatroniStop stops the leader's Patroni as an operator's `systemctl
// stop patroni` does: it shuts its PostgreSQL down (fast) and deletes the
// leader key, and the synchronous standby takes over without waiting for
// the TTL. The old leader's Patroni is started again and rejoins.
func TestPatroniStop(t *testing.T) {
	runDrill(t, "patroni-stop", func(t *testing.T, c *Cluster, leader *Node) func() {
		leader.StopPatroni(t)
		return func() { leader.Start(t, need(t, "patroni")) }
	})
}

// runDrill runs one drill: a cluster, serve under Guardian load on the
// multi-host URL, fault(leader) (which returns what brings the old leader
// back, or nil when Patroni does it alone), and the checks.
func runDrill(t *testing.T, name string, fault func(t *testing.T, c *Cluster, leader *Node) (restore func())) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	c := NewCluster(t, bin)
	leader := c.WaitLeader(t, phaseDeadline)
	standby := c.WaitSync(t, leader, phaseDeadline)
	setup := time.Since(began)

	keys := drills.Keygen(t, bin)
	srv := drills.Serve(t, bin, "--db", c.URL(c.Writer), "--db-password-file", c.WriterPasswordFile, "--keys", keys)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- acsledger serve:\n%s", tail(srv.Log(), 20000))
		}
	})
	logPolicy := drills.LogPolicy(t, bin, keys)
	tally, stopLoad := drills.Load{URL: srv.URL, Keys: drills.MustLoadAgentKeys(t, keys), Sessions: agents, Steps: maxSteps,
		Calls: calls, KeepGoing: true, BackOff: true}.Start(ctx)
	defer stopLoad()

	waitFor(t, "acknowledged decisions before the fault", func() bool {
		if errs := tally.Errs(); len(errs) > 0 {
			t.Fatalf("before the fault: %v\n%s", errs, srv.Log())
		}
		return tally.Recorded() >= warmAcks
	})
	var before verify.Checkpoint
	waitFor(t, "a checkpoint before the fault", func() bool {
		before = srv.Checkpoint(t, logPolicy)
		return before.Size > 0
	})
	// An acknowledgement after the checkpoint was read proves the
	// checkpoint replicated (WAL is flushed in order).
	seen := tally.Recorded()
	waitFor(t, "an acknowledgement after the checkpoint", func() bool { return tally.Recorded() > seen })

	// The watch, on both servers: from the first time the old leader did
	// not answer as a writable server (the end of that poll, so that the
	// window is never wider than it was) to the last time the standby
	// said it was in recovery (the start of that poll), no server took
	// writes. promotedAt is when the standby first answered writable.
	w := watch(ctx, c, leader, standby)
	faultAt := time.Now()
	ackedAtFault := tally.Recorded()
	restore := fault(t, c, leader)
	waitFor(t, "the standby taking writes", w.promoted)
	leaderlessFrom, leaderlessTo, promotedAt := w.window()
	leaderless := promotedAt.Sub(faultAt)
	newLeader := c.WaitLeader(t, phaseDeadline)
	if newLeader != standby {
		t.Fatalf("%s leads after the fault, not the synchronous standby %s", newLeader.Name, standby.Name)
	}
	ackedAtPromote := tally.Recorded()
	waitFor(t, "acknowledged decisions on the new leader", func() bool { return tally.Recorded() >= ackedAtPromote+afterAcks })

	// The old leader comes back (by itself after a crash, by the drill
	// otherwise) and must be a replica of the new leader: fenced.
	if restore != nil {
		restore()
	}
	var rejoined time.Duration
	waitFor(t, "the old leader back as a replica", func() bool {
		ms, err := c.Members()
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.Name == leader.Name && (m.Role == "sync_standby" || m.Role == "replica") && (m.State == "running" || m.State == "streaming") && leader.InRecovery(c) {
				rejoined = time.Since(faultAt)
				return true
			}
		}
		return false
	})
	ackedAtRejoin := tally.Recorded()
	waitFor(t, "acknowledged decisions after the old leader rejoined", func() bool { return tally.Recorded() >= ackedAtRejoin+20 })
	stopLoad()
	firstAck := tally.FirstRecordedAfter(promotedAt)
	if firstAck.IsZero() {
		t.Fatalf("no acknowledged decision after the promotion")
	}

	// Every answered decision is in the ledger under the head its signed
	// answer published, every session verifies, nothing is stored twice.
	answers := tally.Answers()
	sessions := tally.Sessions()
	rep := drills.Check(t, answers, srv.ReadChains(t, sessions))
	if rep.InLedger != rep.Answered || rep.Duplicates != 0 || rep.Unexplained != 0 {
		t.Errorf("after the failover: %s", rep)
	}
	for _, id := range sessions {
		var v struct {
			Verified bool              `json:"verified"`
			Entries  int               `json:"entries"`
			Findings []json.RawMessage `json:"findings"`
		}
		srv.GetJSON(t, "/api/v1/sessions/"+id+"/verify", &v)
		if !v.Verified || v.Entries == 0 {
			t.Errorf("session %s does not verify after the failover: %d entries, findings %s", id, v.Entries, v.Findings)
		}
	}

	// Fail closed: no ALLOW without a chain head, and none to a step sent
	// and answered while no server took writes.
	allowNoHead, allowLeaderless, postureAnswers := 0, 0, 0
	for _, a := range answers {
		switch {
		case a.Err != nil:
		case a.Decision == "allow" && !a.Recorded():
			allowNoHead++
			t.Errorf("ALLOW without a chain head: %+v", a)
		case a.Decision == "allow" && a.Sent.After(leaderlessFrom) && a.Got.Before(leaderlessTo):
			allowLeaderless++
			t.Errorf("ALLOW answered while no server took writes: %+v", a)
		case !a.Recorded():
			postureAnswers++
		}
	}

	// The Merkle log goes on from the checkpoint signed before the fault.
	stored := int64(rep.Entries)
	var after verify.Checkpoint
	waitFor(t, "the log to integrate every entry", func() bool {
		after = srv.Checkpoint(t, logPolicy)
		return int64(after.Size) >= stored
	})
	if err := srv.VerifyConsistency(t, before, after); err != nil {
		t.Errorf("checkpoint %d after the failover does not extend checkpoint %d before it: %v", after.Size, before.Size, err)
	}

	// Fenced: the old leader, now a replica, holds nothing the new leader
	// does not (a commit it had taken alone would make its copy of the
	// entries differ, or pg_rewind would have had to drop it).
	onNew, err := c.Count(newLeader, "SELECT count(*) FROM entries")
	if err != nil {
		t.Fatal(err)
	}
	var onOld int64
	waitFor(t, "the old leader to replay the new leader's entries", func() bool {
		onOld, err = c.Count(leader, "SELECT count(*) FROM entries")
		return err == nil && onOld >= onNew
	})
	if !leader.InRecovery(c) {
		t.Errorf("the old leader %s takes writes after it came back", leader.Name)
	}

	took := time.Since(began)
	t.Logf("drill %s: answered %d, lost %d, ALLOW while leaderless %d (ALLOW without a head %d; no server writable for at least %v); %d answered by the posture during the failover; %d acknowledged before the fault, %d after the promotion; "+
		"leader writable again %v after the fault, first commit on the new leader %v after the fault; old leader back as a replica after %v; checkpoint %d before, %d after, consistent; %s; setup %v, drill %v", name,
		rep.Answered, rep.Answered-rep.InLedger, allowLeaderless, allowNoHead, leaderlessTo.Sub(leaderlessFrom).Round(10*time.Millisecond),
		postureAnswers, ackedAtFault, rep.Answered-ackedAtPromote, leaderless.Round(10*time.Millisecond), firstAck.Sub(faultAt).Round(10*time.Millisecond), rejoined.Round(100*time.Millisecond),
		before.Size, after.Size, rep, setup.Round(time.Second), took.Round(time.Second))
	srv.Stop(t)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	drills.WaitFor(t, phaseDeadline, 50*time.Millisecond, what, cond)
}

// watcher watches the old leader and the standby from the moment of the
// fault.
type watcher struct {
	mu sync.Mutex
	// oldGone is when a poll of the old leader first failed to find it
	// writable; standbyLast when the last poll that found the standby in
	// recovery began; promoted when one first found it writable.
	oldGone, standbyLast, promotedAt time.Time
}

func watch(ctx context.Context, c *Cluster, old, standby *Node) *watcher {
	w := &watcher{}
	go func() {
		for ctx.Err() == nil && !w.promoted() {
			if !old.Writable(c) {
				w.mu.Lock()
				w.oldGone = time.Now()
				w.mu.Unlock()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() {
		for ctx.Err() == nil {
			began := time.Now()
			switch {
			case standby.InRecovery(c):
				w.mu.Lock()
				w.standbyLast = began
				w.mu.Unlock()
			case standby.Writable(c):
				w.mu.Lock()
				w.promotedAt = time.Now()
				w.mu.Unlock()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return w
}

func (w *watcher) promoted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.promotedAt.IsZero()
}

// window returns when no server took writes (an empty window if the
// watch could not tell) and when the standby was first found writable.
func (w *watcher) window() (from, to, promoted time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	from, to = w.oldGone, w.standbyLast
	if from.IsZero() || to.Before(from) {
		to = from
	}
	return from, to, w.promotedAt
}
