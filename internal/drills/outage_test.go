//go:build drills

package drills

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestPostgresRestart stops PostgreSQL under Guardian load and starts it
// again, with each failure posture. While it is down every step is
// answered at once, signed, by the posture: a DENY (ledger_unavailable,
// no chain head) by default, a -32603 error with --on-ledger-failure
// proceed; never an ALLOW. /readyz says unavailable, and once PostgreSQL
// is back it says ready again and steps are recorded again, without
// restarting acsledger. Every step answered with a head is in the ledger.
func TestPostgresRestart(t *testing.T) {
	for _, posture := range []string{"deny", "proceed"} {
		t.Run(posture, func(t *testing.T) {
			ps := pgtest.NewServer(t)
			db := ps.NewDatabase(t)
			Run(t, bin, "migrate", "--db", db)
			keys := Keygen(t, bin)
			ak := MustLoadAgentKeys(t, keys)
			args := []string{"--db", db, "--keys", keys}
			if posture == "proceed" {
				args = append(args, "--on-ledger-failure", "proceed")
			}
			s := Serve(t, bin, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tally, stop := Load{URL: s.URL, Keys: ak, Sessions: 4, Steps: 20000, KeepGoing: true}.Start(ctx)
			waitFor(t, 30*time.Second, "answers before the outage", func() bool { return tally.Recorded() >= 200 })

			ps.Stop(t)
			down := time.Now()
			waitFor(t, 10*time.Second, "/readyz unavailable", func() bool { return !s.Ready() })
			time.Sleep(2 * time.Second)
			ps.Start(t)
			up := time.Now()
			ready := s.WaitReady(t, 30*time.Second)
			recordedAtStart := tally.Recorded()
			waitFor(t, 30*time.Second, "recorded answers after PostgreSQL came back", func() bool { return tally.Recorded() >= recordedAtStart+200 })
			stop()
			for _, err := range tally.Errs() {
				t.Errorf("%v", err)
			}

			var during, posted, allowedUnrecorded, otherwise int
			var firstAfter time.Duration = -1
			for _, a := range tally.Answers() {
				if a.Err != nil {
					t.Errorf("session %s step %s got no answer: %v", a.Session, a.RequestID, a.Err)
					continue
				}
				if a.Sent.After(down) && a.Sent.Before(up) {
					during++
				}
				switch {
				case a.Recorded():
					if a.Sent.After(up) && (firstAfter < 0 || a.Sent.Sub(up) < firstAfter) {
						firstAfter = a.Sent.Sub(up)
					}
				case a.Decision == "allow":
					allowedUnrecorded++
				case posture == "deny" && a.Decision == "deny" && slices.Equal(a.ReasonCodes, []string{"ledger_unavailable"}):
					posted++
				case posture == "proceed" && a.Code == -32603 && a.Reason == "ledger_unavailable":
					posted++
				default:
					otherwise++
					t.Errorf("an answer that follows neither the posture nor records the step: %+v", a)
				}
			}
			if allowedUnrecorded != 0 || posted == 0 || during == 0 {
				t.Errorf("%d ALLOWs without a head, %d posture answers, %d steps sent while PostgreSQL was down", allowedUnrecorded, posted, during)
			}

			rep := Check(t, tally.Answers(), s.ReadChains(t, tally.Sessions()))
			if rep.InLedger != rep.Answered || rep.Duplicates != 0 || rep.Unexplained != 0 {
				t.Errorf("after the outage: %s", rep)
			}
			anchored, _ := s.WaitAnchored(t, rep.Entries)
			rv := s.Reverify(t)
			if !rv.Green() || rv.Entries != anchored {
				t.Errorf("re-verification after the outage: %s; the log anchors %d entries", rv, anchored)
			}
			summary(t, "postgres-restart-"+posture, "down %v; %d answers while down, %d by the posture (%s), 0 ALLOW; ready again %v after PostgreSQL, first recorded step %v after; %s; anchored %d; re-verification %s",
				up.Sub(down).Round(100*time.Millisecond), during, posted, posture, ready.Round(time.Millisecond), firstAfter.Round(time.Millisecond), rep, anchored, rv)
			s.Stop(t)
		})
	}
}
