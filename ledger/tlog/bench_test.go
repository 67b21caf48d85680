package tlog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/internal/proccpu"
	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// The benchmarks are an external test package so that they can run the log
// over the stores' storage (the stores import ledger/tlog).

func TestMain(m *testing.M) { tlogdb.Main(m) }

const testOrigin = tlogtest.Origin

var entryHash = tlogtest.EntryHash

// Run with:
//
//	go test -run '^$' -bench . -benchtime=50000x ./ledger/tlog/
//
// Every figure is reported beside a baseline measured in the same run.

func benchKey(b *testing.B) []string {
	s, _, err := tlog.KeyFromSeed(testOrigin, tlog.Ed25519, tlogtest.Seed("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return []string{s}
}

// benchBacklog is the number of pending entries BenchmarkIntegration
// integrates (ACSLEDGER_BENCH_BACKLOG, default 200,000).
func benchBacklog(b *testing.B) int64 { return envInt(b, "ACSLEDGER_BENCH_BACKLOG", 200_000) }

// envInt is the integer in environment variable name, or def when unset.
func envInt(b *testing.B, name string, def int64) int64 {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return def
}

// BenchmarkIntegration measures integration throughput in leaves/s over a
// backlog of pending entries built outside the timed part. "floor" is only
// the RFC 6962 hashing (leaf hash and compact-range append) of pre-encoded
// leaves; "memory" is the whole integrator (Log.Run: JCS leaf encoding,
// tiles, a signed and consistency-checked checkpoint per batch) over
// in-memory storage; "sqlite" (sqlitestore's write connection and reader
// pool, as the service runs it) and "postgres" add the durable batch transactions. Each iteration integrates the whole backlog, timed from
// Log.Run's start to the checkpoint covering the last entry.
func BenchmarkIntegration(b *testing.B) {
	n := benchBacklog(b)
	ctx := context.Background()
	b.Run("floor", func(b *testing.B) {
		leaves := make([][]byte, n)
		for i := range leaves {
			leaves[i], _ = tlog.Leaf{SessionID: fmt.Sprintf("sess-%d", i/100), Position: int64(i % 100), EntryHash: entryHash("b", int64(i))}.MarshalJCS()
		}
		b.ResetTimer()
		for range b.N {
			rng := tlog.RangeFactory.NewEmptyRange(0)
			for _, leaf := range leaves {
				h := tlog.LeafHash(leaf)
				if err := rng.Append(h[:], nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
	})
	measure := func(b *testing.B, open func(b *testing.B) tlog.Storage) {
		var elapsed, pg, self time.Duration
		for range b.N {
			b.StopTimer()
			s := open(b)
			b.StartTimer()
			pg0, self0 := pgCPU(), selfCPU()
			elapsed += runToSize(b, s, uint64(n))
			pg, self = pg+pgCPU()-pg0, self+selfCPU()-self0
		}
		b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "leaves/s")
		b.ReportMetric(float64(self.Nanoseconds())/1e3/float64(n*int64(b.N)), "go-cpu-us/leaf")
		if pg > 0 {
			b.ReportMetric(float64(pg.Nanoseconds())/1e3/float64(n*int64(b.N)), "pg-cpu-us/leaf")
		}
	}
	b.Run("memory", func(b *testing.B) {
		measure(b, func(b *testing.B) tlog.Storage {
			m := tlog.NewMemStorage()
			m.AddPending(0, n)
			return m.Storage()
		})
	})
	b.Run("sqlite", func(b *testing.B) {
		measure(b, func(b *testing.B) tlog.Storage {
			st := tlogdb.SQLite(b)
			backlogSQLite(b, st, n)
			return st.LogStorage()
		})
	})
	var owner *pgxpool.Pool
	b.Run("postgres", func(b *testing.B) {
		measure(b, func(b *testing.B) tlog.Storage {
			var st *pgstore.Store
			st, owner = tlogdb.PG(b)
			backlogPG(b, st.Pool(), n)
			return st.LogStorage()
		})
		var bytes int64
		if err := owner.QueryRow(ctx, `SELECT pg_total_relation_size('tlog_leaves') + pg_total_relation_size('tlog_tiles')
			+ pg_total_relation_size('tlog_checkpoints') + pg_total_relation_size('tlog_head')`).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bytes)/float64(n), "tlog-bytes/leaf")
	})
}

// runToSize runs Log.Run over s until a checkpoint covers size leaves and
// returns how long that took, with the log's default batching.
func runToSize(b *testing.B, s tlog.Storage, size uint64) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reached := make(chan struct{})
	var once sync.Once
	onCP := func(cp tlog.Checkpoint) {
		if cp.Size >= size {
			once.Do(func() { close(reached) })
		}
	}
	l, err := tlog.New(ctx, s, tlog.Config{Origin: testOrigin, Keys: benchKey(b), OnCheckpoint: onCP})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- l.Run(ctx) }()
	select {
	case <-reached:
	case err := <-done:
		b.Fatalf("Run stopped before integrating %d leaves: %v", size, err)
	}
	elapsed := time.Since(t0)
	cancel()
	<-done
	if got, err := s.Size(context.Background()); err != nil || got != size {
		b.Fatalf("log has %d leaves (%v), want %d", got, err, size)
	}
	return elapsed
}

// backlogSessions is the number of entries per session in the backlogs.
const backlogSessions = 100

// backlogSQLite appends n entries (sessions of 100) in one transaction.
func backlogSQLite(b *testing.B, st *sqlitestore.Store, n int64) {
	db, _ := st.DBs()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	sess, err := tx.Prepare(`INSERT INTO sessions (session_id, agent_id, created_at) VALUES (?, 'agent', 0)`)
	if err != nil {
		b.Fatal(err)
	}
	ent, err := tx.Prepare(`INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
		VALUES (?, ?, ?, ?, ?, ?, 'steps/toolCallRequest', '2026-01-01T00:00:00Z', 0, x'7b7d')`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		session, pos := fmt.Sprintf("sess-%d", i/backlogSessions), i%backlogSessions
		if pos == 0 {
			if _, err := sess.Exec(session); err != nil {
				b.Fatal(err)
			}
		}
		h, prev := backlogHashes(session, pos)
		if _, err := ent.Exec(session, pos, h, prev, fmt.Sprint("e", pos), fmt.Sprint("s", pos)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// backlogPG appends n entries (sessions of 100) by COPY, as the writer role;
// the queue trigger fires for every copied row.
func backlogPG(b *testing.B, writer *pgxpool.Pool, n int64) {
	ctx := context.Background()
	var sessions, entries [][]any
	now := time.Now()
	for i := range n {
		session, pos := fmt.Sprintf("sess-%d", i/backlogSessions), i%backlogSessions
		if pos == 0 {
			sessions = append(sessions, []any{session, "agent", now})
		}
		h, prev := backlogHashes(session, pos)
		entries = append(entries, []any{session, pos, h, prev, fmt.Sprint("e", pos), fmt.Sprint("s", pos),
			"steps/toolCallRequest", "2026-01-01T00:00:00Z", now, []byte("{}")})
	}
	if err := pgx.BeginFunc(ctx, writer, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sessions"}, []string{"session_id", "agent_id", "created_at"}, pgx.CopyFromRows(sessions)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"}, []string{"session_id", "position", "entry_hash", "previous_hash",
			"entry_id", "step_id", "step_type", "entry_timestamp", "recorded_at", "content"}, pgx.CopyFromRows(entries))
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

func backlogHashes(session string, pos int64) (h, prev []byte) {
	cur := entryHash(session, pos)
	if pos > 0 {
		p := entryHash(session, pos-1)
		prev = p[:]
	}
	return cur[:], prev
}

// benchProofLeaves is the log size for BenchmarkInclusionProof
// (ACSLEDGER_BENCH_PROOF_LEAVES, default 1,000,000).
func benchProofLeaves(b *testing.B) int64 {
	return envInt(b, "ACSLEDGER_BENCH_PROOF_LEAVES", 1_000_000)
}

// BenchmarkInclusionProof measures Log.InclusionProof for random leaves of a
// large log, reporting p50 and p99: "memory" is the floor (tiles in memory),
// "postgres" reads tiles through pgstore's log storage. The Postgres log is built by
// integrating in memory and copying tiles, checkpoints and the leaves of the
// incomplete last tile into the tables (COPY), because building it through
// the entries table would take far longer; proofs read only those rows.
func BenchmarkInclusionProof(b *testing.B) {
	n := benchProofLeaves(b)
	ctx := context.Background()
	m := tlog.NewMemStorage()
	m.AddPending(0, n)
	start := time.Now()
	built, err := tlog.New(ctx, m.Storage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b), BatchSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	tlogtest.IntegrateAll(b, built)
	buildTime := time.Since(start)
	m.DropPending()

	measure := func(b *testing.B, l *tlog.Log) {
		lat := make([]time.Duration, 0, b.N)
		r := rand.New(rand.NewPCG(1, 2))
		b.ResetTimer()
		for range b.N {
			idx := r.Uint64N(uint64(n))
			t0 := time.Now()
			if _, err := l.InclusionProof(ctx, idx, uint64(n)); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(n), "leaves")
	}
	b.Run("memory", func(b *testing.B) {
		measure(b, built)
		b.ReportMetric(buildTime.Seconds(), "build-s")
	})
	b.Run("postgres", func(b *testing.B) {
		st, owner := tlogdb.PG(b)
		t0 := time.Now()
		copyToPG(b, owner, m)
		copyTime := time.Since(t0)
		l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b)})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, l)
		b.ReportMetric(copyTime.Seconds(), "copy-s")
	})
}

// copyToPG loads what proofs read from a built memStorage into Postgres as
// the owner: all full tiles, the leaves of the incomplete last tile and the
// latest checkpoint. The other leaf rows and the entries they reference are
// not loaded (the foreign key is dropped in this throwaway database).
func copyToPG(b *testing.B, owner *pgxpool.Pool, m *tlog.MemStorage) {
	tiles, leaves, headSize, head := m.Contents()
	ctx := context.Background()
	if _, err := owner.Exec(ctx, `ALTER TABLE tlog_leaves DROP CONSTRAINT IF EXISTS tlog_leaves_entry_id_fkey`); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, 0, len(tiles))
	for _, t := range tiles {
		rows = append(rows, []any{int16(t.Level), int64(t.N), t.Data, t.Root[:]})
	}
	if _, err := owner.CopyFrom(ctx, pgx.Identifier{"tlog_tiles"}, []string{"level", "idx", "data", "root"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	size := len(leaves)
	rows = rows[:0]
	for i := size - size%tlog.TileWidth; i < size; i++ {
		eh := entryHash("b", int64(i))
		rows = append(rows, []any{int64(i), int64(i), eh[:], leaves[i]})
	}
	if _, err := owner.CopyFrom(ctx, pgx.Identifier{"tlog_leaves"}, []string{"idx", "entry_id", "entry_hash", "data"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO tlog_checkpoints (size, note) VALUES ($1, $2)`, int64(headSize), head); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO tlog_head (size, note) VALUES ($1, $2)`, int64(headSize), head); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAnchoringLatency appends 5,000 entries/s to Postgres for 5 s
// from 8 appenders (each a 25-entry transaction every 40 ms, one multi-row
// INSERT) while Log.Run integrates with the default 250 ms / 256-leaf
// batching, and reports the time from each append's commit to the first
// stored checkpoint covering it, with the rate actually achieved. "poll"
// relies on the batch delay alone (its baseline, reported beside it);
// "notify" calls Log.Notify after each commit, as the ledger can.
func BenchmarkAnchoringLatency(b *testing.B) {
	for _, notify := range []bool{false, true} {
		name := map[bool]string{false: "poll", true: "notify"}[notify]
		b.Run(name, func(b *testing.B) {
			for range b.N {
				anchoringRun(b, notify)
			}
		})
	}
}

func anchoringRun(b *testing.B, notify bool) {
	const appenders, perBatch, every, duration = 8, 25, 40 * time.Millisecond, 5 * time.Second
	st, _ := tlogdb.PG(b)
	writer := st.Pool()
	type signed struct {
		size uint64
		at   time.Time
	}
	var mu sync.Mutex
	var cps []signed
	committed := map[int64]time.Time{} // entry id -> commit time
	onCP := func(cp tlog.Checkpoint) {
		now := time.Now()
		mu.Lock()
		cps = append(cps, signed{cp.Size, now})
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b), OnCheckpoint: onCP})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	start := time.Now()
	var wg sync.WaitGroup
	var total atomic.Int64
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := 0; time.Since(start) < duration; i++ {
				<-tick.C
				ids := appendBatchPG(b, writer, fmt.Sprintf("s%d-%d", a, i), perBatch)
				now := time.Now()
				mu.Lock()
				for _, id := range ids {
					committed[id] = now
				}
				mu.Unlock()
				total.Add(int64(len(ids)))
				if notify {
					l.Notify()
				}
			}
		}()
	}
	wg.Wait()
	rate := float64(total.Load()) / time.Since(start).Seconds()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		finished := len(cps) > 0 && int64(cps[len(cps)-1].size) >= total.Load()
		mu.Unlock()
		if finished {
			break
		}
	}
	cancel()
	<-done
	// Which entry each leaf holds decides which checkpoint anchored it.
	rows, err := writer.Query(context.Background(), `SELECT idx, entry_id FROM tlog_leaves ORDER BY idx`)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	next := 0
	for rows.Next() {
		var idx, id int64
		if err := rows.Scan(&idx, &id); err != nil {
			b.Fatal(err)
		}
		for next < len(cps) && cps[next].size <= uint64(idx) {
			next++
		}
		if next == len(cps) {
			b.Fatalf("leaf %d is in no checkpoint", idx)
		}
		lat = append(lat, cps[next].at.Sub(committed[id]))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if int64(len(lat)) != total.Load() {
		b.Fatalf("%d of %d entries anchored", len(lat), total.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(rate, "appends/s")
	b.ReportMetric(250, "batch-delay-ms")
}

// appendBatchPG appends a new session of n entries in one transaction of
// two statements, fast enough to hold the benchmark's append rate.
func appendBatchPG(b *testing.B, pool *pgxpool.Pool, session string, n int) []int64 {
	ctx := context.Background()
	pos := make([]int64, n)
	hashes := make([][]byte, n)
	prevs := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		h := entryHash(session, int64(i))
		pos[i], hashes[i], ids[i] = int64(i), h[:], fmt.Sprintf("e%d", i)
		if i > 0 {
			prevs[i] = hashes[i-1]
		}
	}
	var got []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session_id, agent_id, created_at) VALUES ($1, 'agent', now())`, session); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
			SELECT $1, p, h, ph, id, id, 'steps/toolCallRequest', '2026-01-01T00:00:00Z', now(), '\x7b7d'
			FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::text[]) AS u(p, h, ph, id) RETURNING id`, session, pos, hashes, prevs, ids)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		b.Error(err)
	}
	return got
}

// pgCPU is the CPU time used so far by the PostgreSQL server this process
// started (internal/pgtest), 0 where /proc cannot be read: on a shared
// machine the CPU a leaf costs moves far less than the rate.
func pgCPU() time.Duration {
	var pg []proccpu.Stat
	for _, p := range proccpu.All() {
		if strings.HasPrefix(p.Comm, "postgres") {
			pg = append(pg, p)
		}
	}
	return proccpu.Sum(proccpu.Below(pg, os.Getpid()))
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWhole is the number of entries BenchmarkWholePath appends
// (ACSLEDGER_BENCH_WHOLE, default 100,000).
func benchWhole(b *testing.B) int64 { return envInt(b, "ACSLEDGER_BENCH_WHOLE", 100_000) }

// BenchmarkWholePath measures the Merkle log's whole path on PostgreSQL
// (durable), the way Tessera's drivers were measured on this machine (about
// 52k leaves/s to a published checkpoint, entries' own writes included):
// 8 writers append entries through the store (AppendBatch, 100 entries of
// one session per call, the store parsing, hashing and chaining each),
// waking the log after each commit, while Log.Run integrates them, signs
// checkpoints and publishes each to a directory; the time runs from the
// first append to the published checkpoint covering the last entry.
// "appends-only" is its same-run baseline: the same appends with no log
// running. x-tessera is leaves/s over Tessera's 52,000 (not same-run).
func BenchmarkWholePath(b *testing.B) {
	n := benchWhole(b)
	const writers, perCall = 8, 100
	appendAll := func(b *testing.B, st *pgstore.Store, after func()) {
		ctx := context.Background()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			wg.Go(func() {
				for {
					first := next.Add(perCall) - perCall
					if first >= n {
						return
					}
					rs := make([]ledger.Record, 0, perCall)
					for i := first; i < min(first+perCall, n); i++ {
						rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("w-%d", first/perCall), AgentID: "agent",
							Entry: storetest.Synthetic(int(i), "whole path")})
					}
					if _, err := st.AppendBatch(ctx, rs); err != nil {
						errs <- err
						return
					}
					after()
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	report := func(b *testing.B, elapsed, pg, self time.Duration) {
		total := float64(n) * float64(b.N)
		b.ReportMetric(total/elapsed.Seconds(), "leaves/s")
		b.ReportMetric(float64(self.Nanoseconds())/1e3/total, "go-cpu-us/leaf")
		if pg > 0 {
			b.ReportMetric(float64(pg.Nanoseconds())/1e3/total, "pg-cpu-us/leaf")
		}
	}
	b.Run("appends-only", func(b *testing.B) {
		var elapsed, pg, self time.Duration
		for range b.N {
			st, _ := tlogdb.PG(b)
			pg0, self0, t0 := pgCPU(), selfCPU(), time.Now()
			appendAll(b, st, func() {})
			elapsed += time.Since(t0)
			pg, self = pg+pgCPU()-pg0, self+selfCPU()-self0
		}
		report(b, elapsed, pg, self)
	})
	b.Run("whole", func(b *testing.B) {
		var elapsed, pg, self time.Duration
		for range b.N {
			st, _ := tlogdb.PG(b)
			ctx, cancel := context.WithCancel(context.Background())
			reached := make(chan struct{})
			var once sync.Once
			dir := b.TempDir()
			l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b), PublishDir: dir,
				OnCheckpoint: func(cp tlog.Checkpoint) {
					if cp.Size >= uint64(n) {
						once.Do(func() { close(reached) })
					}
				}})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			pg0, self0, t0 := pgCPU(), selfCPU(), time.Now()
			go func() { done <- l.Run(ctx) }()
			appendAll(b, st, l.Notify)
			select {
			case <-reached:
			case err := <-done:
				b.Fatalf("Run stopped before integrating %d leaves: %v", n, err)
			}
			elapsed += time.Since(t0)
			pg, self = pg+pgCPU()-pg0, self+selfCPU()-self0
			cancel()
			<-done
			if _, err := os.Stat(fmt.Sprintf("%s/checkpoint.%d", dir, n)); err != nil {
				b.Fatalf("no published checkpoint of size %d: %v", n, err)
			}
		}
		report(b, elapsed, pg, self)
		b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds()/52000, "x-tessera")
	})
}
