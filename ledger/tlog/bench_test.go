package tlog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime=50000x ./ledger/tlog/
//
// Every figure is reported beside a baseline measured in the same run.

func benchKey(b *testing.B) []string {
	s, _, err := KeyFromSeed(testOrigin, Ed25519, tlogtest.Seed("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return []string{s}
}

func drain(b *testing.B, l *Log) {
	for {
		n, err := l.Integrate(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// BenchmarkIntegration measures leaves/s: "floor" is only the RFC 6962
// hashing (leaf hash and compact-range append) of pre-encoded leaves;
// "memory" is the whole integrator (JCS leaf encoding, tiles, a signed and
// consistency-checked checkpoint per 256-leaf batch) over in-memory storage;
// "sqlite" and "postgres" add the durable batch transaction.
func BenchmarkIntegration(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		leaves := make([][]byte, b.N)
		for i := range leaves {
			leaves[i], _ = Leaf{SessionID: fmt.Sprintf("sess-%d", i/100), Position: int64(i % 100), EntryHash: entryHash("b", int64(i))}.MarshalJCS()
		}
		rng := rangeFactory.NewEmptyRange(0)
		b.ResetTimer()
		for _, leaf := range leaves {
			h := LeafHash(leaf)
			if err := rng.Append(h[:], nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
	})
	b.Run("memory", func(b *testing.B) {
		m := newMemStorage()
		m.addPending(0, int64(b.N))
		l, err := New(context.Background(), m, Config{Origin: testOrigin, Keys: benchKey(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		drain(b, l)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
	})
	b.Run("sqlite", func(b *testing.B) {
		db := tlogtest.OpenSQLite(b)
		for i := 0; i < b.N; i += 10000 {
			tlogtest.AppendSQLite(b, db, fmt.Sprintf("sess-%d", i), 0, int64(min(10000, b.N-i)))
		}
		l, err := New(context.Background(), NewSQLiteStorage(db, db), Config{Origin: testOrigin, Keys: benchKey(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		drain(b, l)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
	})
	b.Run("postgres", func(b *testing.B) {
		writer, owner := tlogtest.OpenPG(b)
		ctx := context.Background()
		for i := 0; i < b.N; i += 10000 {
			tlogtest.AppendPG(b, writer, fmt.Sprintf("sess-%d", i), 0, int64(min(10000, b.N-i)))
		}
		l, err := New(ctx, NewPGStorage(writer), Config{Origin: testOrigin, Keys: benchKey(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		drain(b, l)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
		b.StopTimer()
		var bytes int64
		if err := owner.QueryRow(ctx, `SELECT pg_total_relation_size('tlog_leaves') + pg_total_relation_size('tlog_tiles')
			+ pg_total_relation_size('tlog_checkpoints') + pg_total_relation_size('tlog_head')`).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bytes)/float64(b.N), "tlog-bytes/leaf")
	})
}

// benchProofLeaves is the log size for BenchmarkInclusionProof
// (ACSLEDGER_BENCH_PROOF_LEAVES, default 1,000,000).
func benchProofLeaves(b *testing.B) int64 {
	if s := os.Getenv("ACSLEDGER_BENCH_PROOF_LEAVES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkInclusionProof measures Log.InclusionProof for random leaves of a
// large log, reporting p50 and p99: "memory" is the floor (tiles in memory),
// "postgres" reads tiles through PGStorage. The Postgres log is built by
// integrating in memory and copying tiles, checkpoints and the leaves of the
// incomplete last tile into the tables (COPY), because building it through
// the entries table would take far longer; proofs read only those rows.
func BenchmarkInclusionProof(b *testing.B) {
	n := benchProofLeaves(b)
	ctx := context.Background()
	m := newMemStorage()
	m.addPending(0, n)
	start := time.Now()
	built, err := New(ctx, m, Config{Origin: testOrigin, Keys: benchKey(b), BatchSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	drain(b, built)
	buildTime := time.Since(start)
	m.pending = nil

	measure := func(b *testing.B, l *Log) {
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
		writer, owner := tlogtest.OpenPG(b)
		t0 := time.Now()
		copyToPG(b, owner, m)
		copyTime := time.Since(t0)
		l, err := New(ctx, NewPGStorage(writer), Config{Origin: testOrigin, Keys: benchKey(b)})
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
func copyToPG(b *testing.B, owner *pgxpool.Pool, m *memStorage) {
	ctx := context.Background()
	if _, err := owner.Exec(ctx, `ALTER TABLE tlog_leaves DROP CONSTRAINT tlog_leaves_entry_id_fkey`); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, 0, len(m.tiles))
	for _, t := range m.tiles {
		rows = append(rows, []any{int16(t.Level), int64(t.N), t.Data, t.Root[:]})
	}
	if _, err := owner.CopyFrom(ctx, pgx.Identifier{"tlog_tiles"}, []string{"level", "idx", "data", "root"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	size := len(m.leaves)
	rows = rows[:0]
	for i := size - size%TileWidth; i < size; i++ {
		eh := entryHash("b", int64(i))
		rows = append(rows, []any{int64(i), int64(i), eh[:], m.leaves[i]})
	}
	if _, err := owner.CopyFrom(ctx, pgx.Identifier{"tlog_leaves"}, []string{"idx", "entry_id", "entry_hash", "data"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO tlog_checkpoints (size, note) VALUES ($1, $2)`, int64(m.headSz), m.head); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO tlog_head (size, note) VALUES ($1, $2)`, int64(m.headSz), m.head); err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAnchoringLatency appends 5,000 entries/s to Postgres (batches of
// 100 every 20 ms, each its own transaction, one multi-row INSERT) for 5 s while Log.Run integrates
// with the default 250 ms / 256-leaf batching and no Notify calls, and
// reports the time from each append's commit to the first checkpoint that
// covers it. The baseline is the batch delay itself (250 ms).
func BenchmarkAnchoringLatency(b *testing.B) {
	const perBatch, every, duration = 100, 20 * time.Millisecond, 5 * time.Second
	for range b.N {
		writer, _ := tlogtest.OpenPG(b)
		var mu sync.Mutex
		type batch struct {
			end       uint64 // cumulative entries after this batch
			committed time.Time
		}
		var batches []batch
		var lat []time.Duration
		next := 0
		onCP := func(cp Checkpoint) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for next < len(batches) && batches[next].end <= cp.Size {
				for range perBatch {
					lat = append(lat, now.Sub(batches[next].committed))
				}
				next++
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		l, err := New(ctx, NewPGStorage(writer), Config{Origin: testOrigin, Keys: benchKey(b), OnCheckpoint: onCP})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		tick := time.NewTicker(every)
		start := time.Now()
		var total uint64
		for i := 0; time.Since(start) < duration; i++ {
			<-tick.C
			appendBatchPG(b, writer, fmt.Sprintf("s%d", i), perBatch)
			total += perBatch
			mu.Lock()
			batches = append(batches, batch{end: total, committed: time.Now()})
			mu.Unlock()
		}
		tick.Stop()
		rate := float64(total) / time.Since(start).Seconds()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			finished := next == len(batches)
			mu.Unlock()
			if finished {
				break
			}
		}
		cancel()
		<-done
		mu.Lock()
		if next != len(batches) {
			b.Fatalf("%d of %d batches never anchored", len(batches)-next, len(batches))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
		b.ReportMetric(rate, "appends/s")
		b.ReportMetric(250, "batch-delay-ms")
		mu.Unlock()
	}
}

// appendBatchPG appends a new session of n entries in one transaction of
// two statements, fast enough to hold the benchmark's append rate.
func appendBatchPG(b *testing.B, pool *pgxpool.Pool, session string, n int) {
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
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session_id, agent_id, created_at) VALUES ($1, 'agent', now())`, session); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id, step_id, step_type, entry_timestamp, recorded_at, content)
			SELECT $1, p, h, ph, id, id, 'steps/toolCallRequest', '2026-01-01T00:00:00Z', now(), '\x7b7d'
			FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::text[]) AS u(p, h, ph, id)`, session, pos, hashes, prevs, ids)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}
