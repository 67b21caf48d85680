//go:build drills

package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/drills"
	"github.com/acsledger/acsledger/internal/pgtest"
)

// sinkName is the push sink the export failover drill configures.
const sinkName = "rec"

// TestExportCursorFailover pushes every ledger event to a loopback HTTP
// receiver (serve --export) while the Guardian is under load, kills the
// primary with SIGKILL mid-stream and promotes the synchronous standby by
// hand. The sink's cursor lives in the database: the one the promoted
// standby holds is never behind the one the old primary had committed, and
// never ahead of what the receiver acknowledged; delivery goes on from it,
// every entry hash of the final log arrives at least once, and the
// receiver holds no more duplicates than the sink's resent counter says.
// A serve started afterwards reads the cursor from the new primary and
// sends nothing before it again. The receiver keeps the batch in flight at the kill and loses its
// acknowledgement: it answers 503 only once the primary is dead, so the
// sink must remember through the outage that the batch went out, and the
// drill always has duplicates to count.
func TestExportCursorFailover(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()

	primary := pgtest.NewPrimary(t)
	standby := primary.NewStandby(t, "standby1")
	primary.SetSynchronous(t, "standby1")
	db := primary.NewDatabase(t)
	multi := pgtest.Hosts(t, db, primary, standby) + "&target_session_attrs=read-write&connect_timeout=5"
	onStandby := pgtest.Hosts(t, db, standby)

	rec := startReceiver(t)
	keys := drills.Keygen(t, bin)
	drills.Run(t, bin, "migrate", "--db", db)
	serveArgs := []string{"--db", multi, "--keys", keys, "--export", sinkName + "=" + rec.url, "--export-format", sinkName + "=acs"}
	srv := drills.Serve(t, bin, serveArgs...)
	agentKeys := drills.MustLoadAgentKeys(t, keys)

	tally, stopLoad := drills.Load{URL: srv.URL, Keys: agentKeys, Sessions: agents, Steps: maxSteps, Calls: calls, KeepGoing: true, BackOff: true}.Start(ctx)
	defer stopLoad()

	// Mid-stream: the receiver has taken events and the sink has committed
	// a cursor past them, which the standby holds (it is synchronous).
	standbyConn := connect(ctx, t, onStandby)
	defer standbyConn.Close(context.Background())
	// A synchronous commit waits for the standby's flush, not its replay:
	// the migrations may not be visible there yet.
	waitFor(t, "the standby to replay the migrations", func() bool {
		var ok bool
		if err := standbyConn.QueryRow(ctx, "SELECT to_regclass('export_cursors') IS NOT NULL").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	})
	var committed uint64
	waitFor(t, "a committed export cursor before the failover", func() bool {
		if errs := tally.Errs(); len(errs) > 0 {
			t.Fatalf("before the failover: %v\n%s", errs, srv.Log())
		}
		committed = cursorNext(ctx, t, standbyConn)
		return tally.Recorded() >= warmAcks && committed >= 50
	})
	// The sink is still sending: the kill falls in the middle of its work.
	receivedAtKill := rec.events()
	waitFor(t, "events arriving just before the kill", func() bool { return rec.events() > receivedAtKill })

	held := rec.loseNextAck()
	waitFor(t, "a batch in flight at the kill", func() bool { return rec.lostAck() > 0 })
	primary.Kill(t)
	close(held)
	time.Sleep(outage)
	standby.Promote(t)

	// The promoted standby's cursor is the old primary's committed one, or
	// later: never behind it, and never ahead of what the receiver took.
	resumed := cursorNext(ctx, t, standbyConn)
	if resumed < committed {
		t.Errorf("the promoted standby's export cursor is at leaf %d, behind the %d the old primary committed", resumed, committed)
	}
	if missing := rec.missing(leafHashes(ctx, t, standbyConn, resumed)); len(missing) > 0 {
		t.Errorf("the export cursor on the promoted standby is at leaf %d, but the receiver lacks %d of the entries before it (first %s)", resumed, len(missing), missing[0])
	}

	ackedAtPromote := tally.Recorded()
	waitFor(t, "acknowledged decisions after the promotion", func() bool { return tally.Recorded() >= ackedAtPromote+afterAcks })
	stopLoad()

	// The final log: every leaf the new primary holds now. Delivery must
	// catch up with all of it.
	var size uint64
	if err := standbyConn.QueryRow(ctx, "SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves").Scan(&size); err != nil {
		t.Fatal(err)
	}
	final := leafHashes(ctx, t, standbyConn, size)
	var missing []string
	drills.WaitFor(t, 90*time.Second, 100*time.Millisecond, "every entry of the final log at the receiver", func() bool {
		missing = rec.missing(final)
		return len(missing) == 0
	})

	// The cursor follows: it is committed past the final log.
	var st exportStatus
	waitFor(t, "the sink's cursor past the final log", func() bool {
		st = sinkStatus(t, srv)
		return st.NextLeaf >= size
	})
	// Duplicates are allowed and counted: the receiver holds no more of
	// them than the sink says it sent again.
	events, distinct := rec.events(), rec.distinct()
	duplicates := events - distinct
	if lost := rec.lostAck(); lost == 0 || duplicates < lost {
		t.Errorf("the receiver lost the acknowledgement of a batch of %d events, but holds %d duplicates: the batch was not sent again", lost, duplicates)
	}
	if int64(duplicates) > st.Resent {
		t.Errorf("the receiver holds %d duplicate events, but the sink counts %d resent", duplicates, st.Resent)
	}
	t.Logf("export failover: cursor %d committed before the kill, %d on the promoted standby; final log %d leaves, %d missed", committed, resumed, size, len(missing))
	t.Logf("export failover: receiver took %d events, %d distinct entries, %d duplicates (a lost acknowledgement of %d); sink counts acknowledged %d, resent %d, cursor at %d", events, distinct, duplicates, rec.lostAck(), st.Acknowledged, st.Resent, st.NextLeaf)

	// A serve started after the failover reads the cursor from the new
	// primary and goes on from it: no entry before it is sent again, and
	// what comes after it arrives.
	srv.Stop(t)
	stored := cursorNext(ctx, t, standbyConn)
	beforeCursor := final[:min(stored, size)]
	counts := rec.counts(beforeCursor)
	srv = drills.Serve(t, bin, serveArgs...)
	tally, stopLoad = drills.Load{URL: srv.URL, Keys: agentKeys, Sessions: 2, Steps: maxSteps, Calls: calls, KeepGoing: true, BackOff: true}.Start(ctx)
	waitFor(t, "acknowledged decisions after the restart", func() bool { return tally.Recorded() >= 50 })
	stopLoad()
	if err := standbyConn.QueryRow(ctx, "SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves").Scan(&size); err != nil {
		t.Fatal(err)
	}
	final = leafHashes(ctx, t, standbyConn, size)
	drills.WaitFor(t, 90*time.Second, 100*time.Millisecond, "every entry at the receiver after the restart", func() bool {
		missing = rec.missing(final)
		return len(missing) == 0
	})
	waitFor(t, "the restarted sink's cursor past the log", func() bool {
		st = sinkStatus(t, srv)
		return st.NextLeaf >= size
	})
	for i, n := range rec.counts(beforeCursor) {
		if n != counts[i] {
			t.Errorf("leaf %d, before the stored cursor %d, arrived again after the restart (%d times, %d before)", i, stored, n, counts[i])
			break
		}
	}
	events, distinct = rec.events(), rec.distinct()
	if duplicates = events - distinct; int64(duplicates) > st.Resent {
		t.Errorf("after the restart the receiver holds %d duplicate events, but the sink counts %d resent", duplicates, st.Resent)
	}
	t.Logf("export failover: restarted on the new primary at cursor %d; log %d leaves, %d missed; %d events, %d distinct, %d duplicates, resent %d", stored, size, len(missing), events, distinct, duplicates, st.Resent)
	t.Logf("export failover: drill took %v", time.Since(began).Round(time.Second))
	srv.Stop(t)
}

// connect opens a connection to dsn, closed by the caller.
func connect(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cursorNext reads the sink's committed cursor (0 before it has one). The
// connection is to the standby, which stays up through the failover.
func cursorNext(ctx context.Context, t *testing.T, c *pgx.Conn) uint64 {
	t.Helper()
	var next int64
	err := c.QueryRow(ctx, "SELECT next_leaf FROM export_cursors WHERE name = $1", sinkName).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return uint64(next)
}

// leafHashes returns the entry hash of every leaf of the Merkle log below
// size, in leaf order.
func leafHashes(ctx context.Context, t *testing.T, c *pgx.Conn, size uint64) []string {
	t.Helper()
	rows, err := c.Query(ctx, `SELECT encode(e.entry_hash, 'hex') FROM tlog_leaves l
		JOIN entries e ON e.session_id = tlog_leaf_session(l.data) AND e.id = l.entry_id
		WHERE l.idx < $1 ORDER BY l.idx`, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(hashes)) != size {
		t.Fatalf("%d leaves below %d have an entry", len(hashes), size)
	}
	return hashes
}

// exportStatus is the part of a sink's GET /api/v1/exports state the
// drill checks, by its JSON names.
type exportStatus struct {
	Name         string `json:"name"`
	NextLeaf     uint64 `json:"next_leaf"`
	Acknowledged int64  `json:"acknowledged"`
	Resent       int64  `json:"resent"`
}

func sinkStatus(t *testing.T, srv *drills.Server) exportStatus {
	t.Helper()
	var list struct {
		Sinks []exportStatus `json:"sinks"`
	}
	srv.GetJSON(t, "/api/v1/exports", &list)
	for _, s := range list.Sinks {
		if s.Name == sinkName {
			return s
		}
	}
	t.Fatalf("GET /api/v1/exports lists no sink %q: %+v", sinkName, list.Sinks)
	return exportStatus{}
}

// receiver is a loopback HTTP receiver of NDJSON batches of acs events: it
// acknowledges each batch with 204 once it has recorded every event's
// entry hash, and counts how often each arrived.
type receiver struct {
	url string

	mu    sync.Mutex
	count map[string]int
	total int
	// loseAck, when not nil, says to record the next batch and answer it
	// 503 once loseAck is closed; lost is the size of that batch.
	loseAck chan struct{}
	lost    int
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{count: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r.url = "http://" + ln.Addr().String() + "/events"
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 256<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var hashes []string
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		var ev struct {
			Acsledger struct {
				EntryHash string `json:"entry_hash"`
			} `json:"acsledger"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || len(ev.Acsledger.EntryHash) != 64 {
			// Refused: the sink sends the batch again.
			http.Error(w, "not an acs event with an entry hash", http.StatusBadRequest)
			return
		}
		hashes = append(hashes, ev.Acsledger.EntryHash)
	}
	r.mu.Lock()
	for _, h := range hashes {
		r.count[h]++
	}
	r.total += len(hashes)
	lose := r.loseAck
	if lose != nil {
		r.loseAck, r.lost = nil, len(hashes)
	}
	r.mu.Unlock()
	if lose != nil {
		// Kept, but the sink is told otherwise: it must send the batch
		// again and count it resent.
		<-lose
		http.Error(w, "acknowledgement lost", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// loseNextAck makes the receiver keep the next batch and answer it 503
// once the returned channel is closed.
func (r *receiver) loseNextAck() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loseAck = make(chan struct{})
	return r.loseAck
}

// lostAck is the size of the batch whose acknowledgement was lost, 0
// before one was.
func (r *receiver) lostAck() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// events is how many events arrived; distinct how many entry hashes.
func (r *receiver) events() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *receiver) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

// counts returns how often each hash of want arrived.
func (r *receiver) counts(want []string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int, len(want))
	for i, h := range want {
		out[i] = r.count[h]
	}
	return out
}

// missing returns the hashes of want that never arrived.
func (r *receiver) missing(want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range want {
		if r.count[h] == 0 {
			out = append(out, h)
		}
	}
	return out
}
