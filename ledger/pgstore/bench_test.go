package pgstore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
)

// benchEntry is a realistic ContextEntry of about 700 bytes (a denied MCP
// tool call), varied by n.
func benchEntry(n int64) []byte {
	return fmt.Appendf(nil, `{"entry_id":"0b6f1a52-8d1e-4c1b-9f3e-%012d","step_id":"req-%d","step_type":"protocols/MCP/tools/call",`+
		`"timestamp":"2026-03-14T14:02:15.001Z","request_hash":"d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35",`+
		`"decision":"deny","reason_code":"capability_not_granted","policy_version":"bundle-2026-03-01#sha256:1f2e3d",`+
		`"tool":{"server":"jira","name":"create_issue","arguments":{"project":"SEC","summary":"Q1 incidents \u2013 r\u00e9sum\u00e9 %d",`+
		`"priority":2.5,"labels":["q1","audit"],"body":"Collected from reports/2026-Q1/incidents.md; 14 incidents, 3 open."}},`+
		`"provenance_summary":{"origins_seen":["user_input","tool_output"],"entry_count":%d,"max_lineage_depth":1}}`, n, n, n, n)
}

// rawRow is an entries row as the raw baselines insert it: the same columns
// and sizes as the store writes, with no parsing or hashing.
func rawRow(session string, pos int64, n int64, content []byte, recorded time.Time) []any {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos))
	var prev any
	if pos > 0 {
		p := sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos-1))
		prev = p[:]
	}
	return []any{session, pos, h[:], prev, fmt.Sprintf("e-%d", n), fmt.Sprintf("req-%d", n),
		"protocols/MCP/tools/call", "2026-03-14T14:02:15.001Z", recorded, content}
}

var rawColumns = []string{"session_id", "position", "entry_hash", "previous_hash", "entry_id",
	"step_id", "step_type", "entry_timestamp", "recorded_at", "content"}

const rawInsert = `INSERT INTO entries (session_id, position, entry_hash, previous_hash, entry_id,
	step_id, step_type, entry_timestamp, recorded_at, content) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

func reportRows(b *testing.B, rows int64) {
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAppend measures the store beside raw pgx inserts of the same rows
// into the same table, in the same run, with durability on (pgtest keeps
// fsync and synchronous_commit on).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	url := newDB(b)
	s := openStore(b, url, pgstore.Options{})
	owner, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer owner.Close()
	var run atomic.Int64 // fresh session names per benchmark run
	// rawSessions creates k sessions for the raw baselines to insert into.
	rawSessions := func(b *testing.B, k int) []string {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = fmt.Sprintf("raw-%d-%d", run.Add(1), i)
			if _, err := owner.Exec(ctx, "INSERT INTO sessions (session_id, agent_id, created_at) VALUES ($1, 'bench', now())", ids[i]); err != nil {
				b.Fatal(err)
			}
		}
		return ids
	}
	content := benchEntry(0)

	b.Run("single", func(b *testing.B) {
		id := fmt.Sprintf("single-%d", run.Add(1))
		for i := range int64(b.N) {
			if _, err := s.Append(ctx, ledger.Record{SessionID: id, Entry: benchEntry(i)}); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, int64(b.N))
	})
	b.Run("raw-single", func(b *testing.B) {
		id := rawSessions(b, 1)[0]
		now := time.Now()
		for i := range int64(b.N) {
			if _, err := owner.Exec(ctx, rawInsert, rawRow(id, i, i, content, now)...); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, int64(b.N))
	})

	const batch, sessions = 1000, 10
	b.Run("batched", func(b *testing.B) {
		r := run.Add(1)
		var n int64
		for range b.N {
			rs := make([]ledger.Record, batch)
			for i := range rs {
				rs[i] = ledger.Record{SessionID: fmt.Sprintf("batched-%d-%d", r, i%sessions), Entry: benchEntry(n)}
				n++
			}
			if _, err := s.AppendBatch(ctx, rs); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, n)
	})
	b.Run("raw-batched", func(b *testing.B) {
		ids := rawSessions(b, sessions)
		now := time.Now()
		var n int64
		for it := range int64(b.N) {
			rows := make([][]any, batch)
			for i := range rows {
				pos := it*batch/sessions + int64(i/sessions)
				rows[i] = rawRow(ids[i%sessions], pos, n, content, now)
				n++
			}
			err := pgx.BeginFunc(ctx, owner, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"}, rawColumns, pgx.CopyFromRows(rows))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, n)
	})

	// The machine is shared and noisy; this one alternates the two writes
	// of the same rows within each iteration, so both see the same load,
	// and reports their ratio.
	b.Run("batched-vs-raw", func(b *testing.B) {
		r := run.Add(1)
		ids := rawSessions(b, sessions)
		var appendTime, rawTime time.Duration
		var n int64
		for it := range int64(b.N) {
			rs := make([]ledger.Record, batch)
			rows := make([][]any, batch)
			now := time.Now()
			for i := range rs {
				rs[i] = ledger.Record{SessionID: fmt.Sprintf("vs-%d-%d", r, i%sessions), Entry: benchEntry(n)}
				rows[i] = rawRow(ids[i%sessions], it*batch/sessions+int64(i/sessions), n, content, now)
				n++
			}
			t0 := time.Now()
			if _, err := s.AppendBatch(ctx, rs); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			err := pgx.BeginFunc(ctx, owner, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"}, rawColumns, pgx.CopyFromRows(rows))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			appendTime += t1.Sub(t0)
			rawTime += time.Since(t1)
		}
		b.ReportMetric(float64(n)/appendTime.Seconds(), "append-rows/s")
		b.ReportMetric(float64(n)/rawTime.Seconds(), "raw-rows/s")
		b.ReportMetric(rawTime.Seconds()/appendTime.Seconds(), "append/raw")
	})

	const goroutines, concSessions = 64, 16
	b.Run("concurrent", func(b *testing.B) {
		r := run.Add(1)
		var n, g atomic.Int64
		b.SetParallelism((goroutines + 1) / 2) // x GOMAXPROCS (2 here)
		b.RunParallel(func(pb *testing.PB) {
			id := fmt.Sprintf("conc-%d-%d", r, g.Add(1)%concSessions)
			for pb.Next() {
				if _, err := s.Append(ctx, ledger.Record{SessionID: id, Entry: benchEntry(n.Add(1))}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRows(b, n.Load())
	})
	// As batched-vs-raw, for the concurrent case: each iteration is a round
	// of 64 goroutines appending 4 entries each through the store, then a
	// round of 64 goroutines inserting the same number of raw rows.
	b.Run("concurrent-vs-raw", func(b *testing.B) {
		const perGoroutine = 4
		r := run.Add(1)
		ids := rawSessions(b, concSessions)
		pool, err := pgxpool.New(ctx, url+"&pool_max_conns=64")
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		var pos [concSessions]atomic.Int64
		var n atomic.Int64
		round := func(work func(g int) error) time.Duration {
			start := time.Now()
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perGoroutine {
						if err := work(g); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			return time.Since(start)
		}
		now := time.Now()
		var appendTime, rawTime time.Duration
		for range b.N {
			appendTime += round(func(g int) error {
				_, err := s.Append(ctx, ledger.Record{SessionID: fmt.Sprintf("cvr-%d-%d", r, g%concSessions), Entry: benchEntry(n.Add(1))})
				return err
			})
			rawTime += round(func(g int) error {
				k := g % concSessions
				_, err := pool.Exec(ctx, rawInsert, rawRow(ids[k], pos[k].Add(1)-1, n.Add(1), content, now)...)
				return err
			})
		}
		rows := float64(b.N * goroutines * perGoroutine)
		b.ReportMetric(rows/appendTime.Seconds(), "append-rows/s")
		b.ReportMetric(rows/rawTime.Seconds(), "raw-rows/s")
		b.ReportMetric(rawTime.Seconds()/appendTime.Seconds(), "append/raw")
	})
	b.Run("raw-concurrent", func(b *testing.B) {
		ids := rawSessions(b, concSessions)
		pool, err := pgxpool.New(ctx, url+"&pool_max_conns=64")
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		now := time.Now()
		var n, g atomic.Int64
		var pos [concSessions]atomic.Int64
		b.SetParallelism((goroutines + 1) / 2)
		b.RunParallel(func(pb *testing.PB) {
			k := g.Add(1) % concSessions
			for pb.Next() {
				if _, err := pool.Exec(ctx, rawInsert, rawRow(ids[k], pos[k].Add(1)-1, n.Add(1), content, now)...); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRows(b, n.Load())
	})
}
