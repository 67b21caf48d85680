// Package readroute sends a store's compliance reads to a read replica (a
// streaming standby of a PostgreSQL primary, acsledger serve --db-read)
// while the replica is close enough behind, and everything else to the
// primary: docs/operations.md, "Failover on a synchronous standby".
//
// A Monitor measures the replica's lag for /metrics, /stats and the choice
// of where reads go; Reads routes a store's reads by it; and CaughtUpLog
// makes a verification wait for the replica to hold what the Merkle log,
// read from the primary, covers.
package readroute

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/internal/tick"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// LagEvery is how often serve measures the read replica's lag.
const LagEvery = time.Second

// CatchUpTimeout bounds how long a verification waits for the read
// replica to replay what the Merkle log it read from the primary covers.
const CatchUpTimeout = 10 * time.Second

// The read replica's lag in /metrics: acsledger_db_read_lag_bytes and
// acsledger_db_read_lag_seconds. The meter keeps the name it had when this
// code lived in cmd/acsledger, because the Prometheus exporter prints it
// in every series (otel_scope_name) and /metrics stays as it was.
var (
	meter       = otel.Meter("github.com/acsledger/acsledger/cmd/acsledger")
	lagBytes, _ = meter.Int64Gauge("acsledger.db_read.lag_bytes", metric.WithUnit("By"),
		metric.WithDescription("WAL bytes the read replica has not replayed"))
	lagSecs, _ = meter.Float64Gauge("acsledger.db_read.lag_seconds", metric.WithUnit("s"),
		metric.WithDescription("age of the read replica's newest replayed commit while it is behind the primary"))
	staleSecs, _ = meter.Float64Gauge("acsledger.db_read.stale_seconds", metric.WithUnit("s"),
		metric.WithDescription("how long the read replica has been missing WAL the primary had written: what --db-read-max-lag limits"))
	serving, _ = meter.Int64Gauge("acsledger.db_read.serving",
		metric.WithDescription("1 for the store (replica or primary) the compliance reads go to and why, 0 for the other reasons"))
)

// Where the compliance reads go, and why: reads_from and reads_reason in
// /stats, the store and reason attributes of acsledger_db_read_serving.
const (
	readsReplica = "replica"
	readsPrimary = "primary"

	// withinMaxLag: the replica was measured and is no staler than
	// --db-read-max-lag.
	withinMaxLag = "within_max_lag"
	// promoted: the replica is no longer a standby; it holds what it
	// committed as the primary it now is.
	promoted = "promoted"
	// overMaxLag: the replica has been missing WAL the primary had for
	// longer than --db-read-max-lag.
	overMaxLag = "over_max_lag"
	// replicaUnreachable: the replica could not be measured or read.
	replicaUnreachable = "unreachable"
)

// readsReasons are every store and reason the serving gauge reports,
// so that each series is always there, at 0 when it is not the case.
var readsReasons = []struct{ store, reason string }{
	{readsReplica, withinMaxLag}, {readsReplica, promoted},
	{readsPrimary, overMaxLag}, {readsPrimary, replicaUnreachable},
}

func recordServing(ctx context.Context, store, reason string) {
	for _, r := range readsReasons {
		v := int64(0)
		if r.store == store && r.reason == reason {
			v = 1
		}
		serving.Record(ctx, v, metric.WithAttributes(attribute.String("store", r.store), attribute.String("reason", r.reason)))
	}
}

// staleness measures how long a read replica has been missing WAL the
// primary had written, the figure --db-read-max-lag limits. It keeps the
// primary's WAL positions as serve saw them at each measurement, and the
// replica is stale by the age of the oldest position it has not replayed.
//
// Why not the replica's own figures: pg_last_xact_replay_timestamp() is
// the primary's commit time of the last transaction replayed, and "now
// minus that" (lag_seconds) counts the primary's idleness as lag: after an
// idle hour, the first WAL record (a checkpoint, a vacuum) makes a replica
// a few bytes behind look an hour stale, and the two servers' clocks may
// disagree. pg_stat_replication's replay_lag on the primary needs a
// monitoring role, names no standby we can match for sure, and stops
// moving while replay is paused. The WAL positions are exact, are read
// from both servers already, and only serve's clock measures the time
// between them: on an idle primary the position stays put and a caught-up
// replica is not stale at all; a replica that stopped replaying is stale
// from the first measurement that saw the primary write past it.
//
// The figure is a lower bound, by at most one measurement interval: the
// WAL was written at most that long before a measurement saw it.
type staleness struct {
	// seen are the primary's WAL positions the replica had not replayed
	// when last measured, each with when it was first seen, oldest first.
	seen []walSeen
}

type walSeen struct {
	at  time.Time
	pos pgstore.LSN
}

// maxSeen bounds staleness's memory: past maxSeen positions (a replica
// that stopped replaying for over an hour) every other one is dropped,
// the oldest always kept, so the figure stays exact until the replica has
// replayed that oldest position and may fall short by the gaps after.
const maxSeen = 4096

// measure records a measurement at now: the primary's WAL position, and
// how far the replica had replayed. It returns how long the replica has
// been missing WAL the primary had: 0 when it has replayed everything a
// measurement has seen the primary write.
func (st *staleness) measure(now time.Time, primary, replayed pgstore.LSN) time.Duration {
	if n := len(st.seen); primary > replayed && (n == 0 || primary > st.seen[n-1].pos) {
		st.seen = append(st.seen, walSeen{now, primary})
	}
	i := 0
	for i < len(st.seen) && st.seen[i].pos <= replayed {
		i++
	}
	st.seen = append(st.seen[:0], st.seen[i:]...)
	if len(st.seen) > maxSeen {
		kept := st.seen[:1]
		for j := 2; j < len(st.seen); j += 2 {
			kept = append(kept, st.seen[j])
		}
		st.seen = kept
	}
	if len(st.seen) == 0 {
		return 0
	}
	return max(now.Sub(st.seen[0].at), 0)
}

// reset forgets what was seen, for a replica that is no longer a standby.
func (st *staleness) reset() { st.seen = st.seen[:0] }

// Lag is how far the read replica was behind the primary when last
// measured, and where the compliance reads go because of it. Its fields
// are web.ReplicaLag's, in the same order, so that the /stats encoding is
// web's and serve converts one into the other.
type Lag struct {
	// Bytes of WAL not replayed; Seconds, the age of the replica's newest
	// commit while it is behind (0 once caught up).
	Bytes   uint64
	Seconds float64
	// Replayed and Primary are the compared WAL positions, as text.
	Replayed, Primary string
	// MeasuredAt is when; Problem says why the lag is unknown, if it is:
	// "unreachable" or "not_standby".
	MeasuredAt time.Time
	Problem    string
	// StaleSeconds is what staleness measured, MaxLagSeconds the limit
	// it is held to (0: none).
	StaleSeconds, MaxLagSeconds float64
	// ReadsFrom is readsReplica or readsPrimary, ReadsReason one of the
	// reasons of readsReasons.
	ReadsFrom, ReadsReason string
}

// Monitor measures the read replica's lag, for /metrics, /stats and
// the choice of where reads go: while the replica cannot be measured
// (unreachable) or has been missing the primary's WAL for longer than
// maxLag, reads go to the primary.
type Monitor struct {
	r   *storeopen.ReadReplica
	log *slog.Logger
	// maxLag is --db-read-max-lag; 0 sets no limit.
	maxLag time.Duration

	mu    sync.Mutex
	last  Lag
	stale staleness // measure's only
}

// NewMonitor measures r once and returns the monitor; Run keeps measuring.
// maxLag is --db-read-max-lag (0 sets no limit); log gets a line each time
// the reads change store.
func NewMonitor(ctx context.Context, r *storeopen.ReadReplica, maxLag time.Duration, log *slog.Logger) *Monitor {
	m := &Monitor{r: r, log: log, maxLag: maxLag}
	m.measure(ctx)
	return m
}

// Run measures the lag every interval until ctx ends.
func (m *Monitor) Run(ctx context.Context, interval time.Duration) {
	tick.Every(ctx, interval, nil, func() { m.measure(ctx) })
}

func (m *Monitor) measure(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lag, err := m.r.Lag(ctx)
	now := time.Now().UTC()
	cur := Lag{MeasuredAt: now, MaxLagSeconds: m.maxLag.Seconds(), ReadsFrom: readsReplica, ReadsReason: withinMaxLag}
	switch {
	case errors.Is(err, pgstore.ErrNotStandby):
		cur.Problem, cur.ReadsReason = "not_standby", promoted
		m.stale.reset()
	case err != nil:
		cur.Problem, cur.ReadsFrom, cur.ReadsReason = "unreachable", readsPrimary, replicaUnreachable
	default:
		stale := m.stale.measure(now, lag.Primary, lag.Replayed)
		cur.Bytes, cur.Seconds, cur.StaleSeconds = lag.Bytes, lag.Behind.Seconds(), stale.Seconds()
		cur.Replayed, cur.Primary = lag.Replayed.String(), lag.Primary.String()
		if m.maxLag > 0 && stale > m.maxLag {
			cur.ReadsFrom, cur.ReadsReason = readsPrimary, overMaxLag
		}
		lagBytes.Record(ctx, int64(lag.Bytes))
		lagSecs.Record(ctx, lag.Behind.Seconds())
		staleSecs.Record(ctx, stale.Seconds())
	}
	recordServing(ctx, cur.ReadsFrom, cur.ReadsReason)
	m.mu.Lock()
	prev := m.last
	m.last = cur
	m.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	switch {
	case cur.Problem != prev.Problem && cur.Problem != "":
		m.log.Warn("read replica: lag unknown", "problem", cur.Problem, "reads_from", cur.ReadsFrom, "err", err)
	case cur.ReadsReason == overMaxLag && prev.ReadsReason != overMaxLag:
		m.log.Warn("read replica: staler than --db-read-max-lag, compliance reads go to the primary",
			"stale_seconds", cur.StaleSeconds, "max_lag", m.maxLag, "lag_bytes", cur.Bytes)
	case cur.ReadsFrom == readsReplica && prev.ReadsFrom == readsPrimary:
		m.log.Info("read replica: measured again within --db-read-max-lag, compliance reads go to it", "stale_seconds", cur.StaleSeconds)
	}
}

// unreachable records that a read could not reach the replica, so that
// reads go to the primary until the next measurement succeeds.
func (m *Monitor) unreachable(err error) {
	m.mu.Lock()
	was := m.last.Problem
	m.last = Lag{MeasuredAt: time.Now().UTC(), Problem: "unreachable", MaxLagSeconds: m.maxLag.Seconds(),
		ReadsFrom: readsPrimary, ReadsReason: replicaUnreachable}
	m.mu.Unlock()
	recordServing(context.Background(), readsPrimary, replicaUnreachable)
	if was != "unreachable" {
		m.log.Warn("read replica: unreachable, compliance reads go to the primary", "err", err)
	}
}

// Lag is the latest measurement (web.Options.ReplicaLag).
func (m *Monitor) Lag() Lag {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// usable reports whether reads should go to the replica: its latest
// measurement succeeded and found it within maxLag. A promoted replica
// (not_standby) is a primary now and holds everything it committed, so
// it stays usable.
func (m *Monitor) usable() bool {
	return m.Lag().ReadsFrom == readsReplica
}

// Reader is every compliance read: what Reads sends to the replica.
type Reader interface {
	ledger.ChainReader
	ledger.StepReader
	SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error)
	SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error)
	DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error)
	TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error)
	QuarantineCount(ctx context.Context) (n int64, ok bool, err error)
}

// Reads are the compliance reads of the web layer with a read replica:
// they go to the replica while it is usable, else to the primary. The
// primary takes every write and the reads that must be current (tokens,
// policy bundles, ingest's duplicate checks): serve embeds Reads beside
// the primary store, so that Reads' methods stand in for the store's own.
type Reads struct {
	primary Reader
	replica *storeopen.ReadReplica
	mon     *Monitor
}

var _ Reader = Reads{}

// NewReads routes the compliance reads of primary to replica while mon
// finds the replica usable.
func NewReads(primary Reader, replica *storeopen.ReadReplica, mon *Monitor) Reads {
	return Reads{primary: primary, replica: replica, mon: mon}
}

// fromReplica runs read on the replica while it is usable, else on the
// primary. A replica that cannot be reached (no connection, a connection
// cut) is marked so at once and the read is made on the primary: a
// compliance query does not fail because the replica went away.
func fromReplica[T any](ctx context.Context, r Reads, read func(Reader) (T, error)) (T, error) {
	if !r.mon.usable() {
		return read(r.primary)
	}
	v, err := read(r.replica)
	if err != nil && ctx.Err() == nil && unreachable(err) {
		r.mon.unreachable(err)
		return read(r.primary)
	}
	return v, err
}

// unreachable reports whether err says the database could not be talked
// to or is going away (a connection exception, SQLSTATE class 08, or a
// shutdown, 57P01-57P03: what a stopping server sends its connections),
// rather than answering with an error of its own.
func unreachable(err error) bool {
	var connect *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

func (r Reads) Session(ctx context.Context, id string) (ledger.Session, error) {
	return fromReplica(ctx, r, func(s Reader) (ledger.Session, error) { return s.Session(ctx, id) })
}

func (r Reads) Sessions(ctx context.Context, f ledger.SessionFilter) (ledger.SessionPage, error) {
	return fromReplica(ctx, r, func(s Reader) (ledger.SessionPage, error) { return s.Sessions(ctx, f) })
}

func (r Reads) Entries(ctx context.Context, id string, from int64, limit int) ([]ledger.Entry, error) {
	return fromReplica(ctx, r, func(s Reader) ([]ledger.Entry, error) { return s.Entries(ctx, id, from, limit) })
}

func (r Reads) EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error) {
	return fromReplica(ctx, r, func(s Reader) ([]ledger.Entry, error) { return s.EntriesByStep(ctx, stepID, sessionID) })
}

func (r Reads) Response(ctx context.Context, id string, position int64) ([]byte, error) {
	return fromReplica(ctx, r, func(s Reader) ([]byte, error) { return s.Response(ctx, id, position) })
}

func (r Reads) Request(ctx context.Context, id string, position int64) ([]byte, error) {
	return fromReplica(ctx, r, func(s Reader) ([]byte, error) { return s.Request(ctx, id, position) })
}

func (r Reads) SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error) {
	return fromReplica(ctx, r, func(s Reader) (ledger.SearchPage, error) { return s.SearchEntries(ctx, f) })
}

func (r Reads) SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error) {
	return fromReplica(ctx, r, func(s Reader) (ledger.SessionSearchPage, error) { return s.SearchSessions(ctx, f) })
}

func (r Reads) DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error) {
	return fromReplica(ctx, r, func(s Reader) ([]ledger.DayStats, error) { return s.DailyStats(ctx, since, exclude) })
}

func (r Reads) TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error) {
	return fromReplica(ctx, r, func(s Reader) ([]ledger.TreeSize, error) { return s.TreeSizes(ctx, n) })
}

func (r Reads) QuarantineCount(ctx context.Context) (int64, bool, error) {
	type count struct {
		n  int64
		ok bool
	}
	c, err := fromReplica(ctx, r, func(s Reader) (count, error) {
		n, ok, err := s.QuarantineCount(ctx)
		return count{n, ok}, err
	})
	return c.n, c.ok, err
}

// caughtUpLog is the Merkle log as verification reads it beside a read
// replica. The log lives on the primary; its leaves name entries committed
// there, which a lagging replica may not hold yet, and a verification
// would report them deleted. So after each read of the log's checkpoint
// or of a session's leaves, it waits until the replica has replayed
// everything the primary had written by then.
type caughtUpLog struct {
	*tlog.Log
	reads Reads
}

var _ evidence.Log = caughtUpLog{}

// CaughtUpLog is l as verification reads it beside the replica of reads.
func CaughtUpLog(l *tlog.Log, reads Reads) evidence.Log { return caughtUpLog{Log: l, reads: reads} }

func (l caughtUpLog) catchUp(ctx context.Context) error {
	if !l.reads.mon.usable() {
		return nil // reads go to the primary
	}
	return l.reads.replica.CatchUp(ctx, CatchUpTimeout)
}

func (l caughtUpLog) Checkpoint(ctx context.Context) ([]byte, error) {
	cp, err := l.Log.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return cp, l.catchUp(ctx)
}

func (l caughtUpLog) CheckpointAt(ctx context.Context, size uint64) ([]byte, error) {
	cp, err := l.Log.CheckpointAt(ctx, size)
	if err != nil {
		return nil, err
	}
	return cp, l.catchUp(ctx)
}

func (l caughtUpLog) SessionLeaves(ctx context.Context, sessionID string) iter.Seq2[tlog.LoggedLeaf, error] {
	return func(yield func(tlog.LoggedLeaf, error) bool) {
		for ll, err := range l.Log.SessionLeaves(ctx, sessionID) {
			if !yield(ll, err) || err != nil {
				return
			}
		}
		// The caller reads the session's length next.
		if err := l.catchUp(ctx); err != nil {
			yield(tlog.LoggedLeaf{}, err)
		}
	}
}
