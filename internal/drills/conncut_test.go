//go:build drills

package drills

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// Queries of the connection-cut drill, run as the superuser beside the
// service.
const (
	// backendsQuery lists the service's connections to its database, and
	// whether each is inside a transaction.
	backendsQuery = `SELECT pid, xact_start IS NOT NULL FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
	// partialQuery counts what a transaction cut half-way would leave: a
	// head that does not match its chain (length or hash), a Guardian
	// entry without the signed response written with it, a request
	// remembered without its entry (other than the handshakes, $1, which
	// are remembered and record none).
	partialQuery = `SELECT
		(SELECT count(*) FROM heads h WHERE h.length <> (SELECT count(*) FROM entries e WHERE e.session_id = h.session_id)
			OR h.head IS DISTINCT FROM (SELECT e.entry_hash FROM entries e WHERE e.session_id = h.session_id AND e.position = h.length - 1)),
		(SELECT count(*) FROM entries e WHERE e.step_type LIKE 'steps/%'
			AND NOT EXISTS (SELECT 1 FROM responses r WHERE r.session_id = e.session_id AND r.position = e.position)),
		(SELECT count(*) FROM requests q WHERE q.request_id <> ALL ($1::text[])
			AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.session_id = q.session_id AND e.step_id = q.request_id))`
)

// TestConnectionCut terminates the service's PostgreSQL connections
// (pg_terminate_backend) again and again while the Guardian appends, many
// of them inside a transaction. No chain is left partial: every head
// matches its chain, every Guardian entry has its signed response and
// every remembered request its entry; every step answered with a head is
// in the ledger, and the ledger re-verifies green.
func TestConnectionCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.NewDatabase(t)
	Run(t, bin, "migrate", "--db", db)
	keys := Keygen(t, bin)
	ak := MustLoadAgentKeys(t, keys)
	admin, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	s := Serve(t, bin, "--db", db, "--keys", keys)
	tally, stop := Load{URL: s.URL, Keys: ak, Sessions: 6, Steps: 20000, KeepGoing: true}.Start(ctx)
	waitFor(t, 30*time.Second, "answers before the cuts", func() bool { return tally.Recorded() >= 200 })

	const rounds = 40
	cut, inTx := 0, 0
	for range rounds {
		rows, err := admin.Query(ctx, backendsQuery)
		if err != nil {
			t.Fatal(err)
		}
		type backend struct {
			pid  int32
			inTx bool
		}
		bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (b backend, err error) {
			return b, r.Scan(&b.pid, &b.inTx)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			var done bool
			if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", b.pid).Scan(&done); err != nil {
				t.Fatal(err)
			}
			if done {
				cut++
				if b.inTx {
					inTx++
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	recordedAfterCuts := tally.Recorded()
	waitFor(t, 30*time.Second, "recorded answers after the cuts", func() bool { return tally.Recorded() >= recordedAfterCuts+100 })
	stop()
	for _, err := range tally.Errs() {
		t.Errorf("%v", err)
	}
	if inTx == 0 {
		t.Errorf("%d connections cut, none with a transaction open", cut)
	}

	var badHeads, noResponse, noEntry int64
	if err := admin.QueryRow(ctx, partialQuery, tally.Handshakes()).Scan(&badHeads, &noResponse, &noEntry); err != nil {
		t.Fatal(err)
	}
	if badHeads+noResponse+noEntry != 0 {
		t.Errorf("partial writes: %d heads off their chain, %d entries without their response, %d requests without their entry", badHeads, noResponse, noEntry)
	}
	rep := Check(t, tally.Answers(), s.ReadChains(t, tally.Sessions()))
	anchored, _ := s.WaitAnchored(t, rep.Entries)
	rv := s.Reverify(t)
	if !rv.Green() || rv.Entries != anchored || rep.InLedger != rep.Answered || rep.Answered == 0 || rep.InFlight != 0 || rep.Duplicates != 0 || rep.Unexplained != 0 {
		t.Errorf("after the cuts: %s; re-verification %s; the log anchors %d entries", rep, rv, anchored)
	}
	summary(t, "connection-cut", "%d rounds, %d connections cut (%d with a transaction open); %s; partial: %d heads, %d responses, %d requests; anchored %d; re-verification %s",
		rounds, cut, inTx, rep, badHeads, noResponse, noEntry, anchored, rv)
	s.Stop(t)
}
