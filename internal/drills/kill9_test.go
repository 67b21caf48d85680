//go:build drills

package drills

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestKill9Guardian kills `acsledger serve` with SIGKILL under Guardian
// load, twice, on each store, and restarts it: every step that got a
// signed answer is in the ledger under the head the answer published, the
// chains recompute, the Merkle log anchors every entry once the integrator
// caught up, the whole-ledger re-verification is green, and no step is
// stored twice. The requests the kill cut are reported as committed or
// not.
func TestKill9Guardian(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := st.open(t)
			keys := Keygen(t, bin)
			ak := MustLoadAgentKeys(t, keys)
			var (
				answers  []Answer
				sessions []string
			)
			for cycle := range 2 {
				s := Serve(t, bin, "--db", db, "--keys", keys)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				tally, stop := Load{URL: s.URL, Keys: ak, Sessions: 6, Steps: 3000}.Start(ctx)
				// Kill once the load is well under way, at a different
				// point each cycle.
				waitFor(t, 30*time.Second, fmt.Sprintf("%d answers", 300+200*cycle), func() bool { return tally.Recorded() >= 300+200*cycle })
				s.Kill(t)
				stop()
				cancel()
				for _, err := range tally.Errs() {
					t.Errorf("cycle %d: %v", cycle+1, err)
				}
				answers = append(answers, tally.Answers()...)
				sessions = append(sessions, tally.Sessions()...)
			}

			s := Serve(t, bin, "--db", db, "--keys", keys)
			logAtRestart := s.LogSize(t)
			rep := Check(t, answers, s.ReadChains(t, sessions))
			if rep.Answered == 0 || rep.InFlight == 0 || rep.InLedger != rep.Answered || rep.Duplicates != 0 || rep.Unrecorded != 0 || rep.Unexplained != 0 {
				t.Errorf("after two kills: %s", rep)
			}
			anchored, caughtUp := s.WaitAnchored(t, rep.Entries)
			rv := s.Reverify(t)
			if !rv.Green() || rv.Entries != anchored {
				t.Errorf("re-verification after two kills: %s; the log anchors %d entries", rv, anchored)
			}
			summary(t, "kill9-guardian-"+st.name, "2 kills; %s; anchored %d of %d in the ledger (log %d at the restart, grew for %v); re-verification %s",
				rep, anchored, rv.Entries, logAtRestart, caughtUp.Round(time.Millisecond), rv)
			s.Stop(t)
		})
	}
}

// waitFor polls cond every 10 ms and fails t if it is still false after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitFor(t, d, 10*time.Millisecond, what, cond)
}
