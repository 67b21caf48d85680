package tlog_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// BenchmarkReceiptAnchor measures the log's part of issuing a receipt,
// Log.FirstAnchorAt (the checkpoint that first covered a random leaf, its
// cosignatures, and the inclusion proof in that checkpoint's tree), beside
// its baseline measured in the same run on the same leaves: the inclusion
// proof against the latest checkpoint (Log.InclusionProof), which is what
// the existing entry-proof route serves. The log has
// ACSLEDGER_BENCH_PROOF_LEAVES leaves (default 1,000,000; the issue's
// figure is for 10,000,000) with a checkpoint every 4,096 leaves; the
// Postgres log is loaded as for BenchmarkInclusionProof, with every
// checkpoint. The rest of a receipt (the entry, its response and its leaf
// index, each one primary-key or unique-index row) does not grow with the
// log; BenchmarkReceipt in ledger/evidence measures the whole path.
func BenchmarkReceiptAnchor(b *testing.B) {
	n := benchProofLeaves(b)
	ctx := context.Background()
	m := tlog.NewMemStorage()
	m.AddPending(0, n)
	built, err := tlog.New(ctx, m.Storage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b), BatchSize: 4096, BacklogBatchSize: 4096})
	if err != nil {
		b.Fatal(err)
	}
	tlogtest.IntegrateAll(b, built)
	m.DropPending()

	measure := func(b *testing.B, l *tlog.Log) {
		anchor := make([]time.Duration, 0, b.N)
		incl := make([]time.Duration, 0, b.N)
		r := rand.New(rand.NewPCG(3, 4))
		b.ResetTimer()
		for range b.N {
			idx := r.Uint64N(uint64(n))
			t0 := time.Now()
			a, err := l.FirstAnchorAt(ctx, idx)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := l.InclusionProof(ctx, idx, uint64(n)); err != nil {
				b.Fatal(err)
			}
			incl = append(incl, time.Since(t1))
			anchor = append(anchor, t1.Sub(t0))
			if a.Size <= idx || a.Size > idx+4096 {
				b.Fatalf("leaf %d first anchored at size %d", idx, a.Size)
			}
		}
		b.StopTimer()
		for _, s := range []struct {
			name string
			lat  []time.Duration
		}{{"receipt", anchor}, {"inclusion", incl}} {
			slices.Sort(s.lat)
			b.ReportMetric(float64(s.lat[len(s.lat)/2].Microseconds())/1000, s.name+"-p50-ms")
			b.ReportMetric(float64(s.lat[len(s.lat)*99/100].Microseconds())/1000, s.name+"-p99-ms")
		}
		b.ReportMetric(float64(n), "leaves")
	}
	b.Run("memory", func(b *testing.B) { measure(b, built) })
	b.Run("postgres", func(b *testing.B) {
		st, owner := tlogdb.PG(b)
		copyToPG(b, owner, m)
		_, _, headSize, _ := m.Contents()
		var rows [][]any
		for size, note := range m.Checkpoints() {
			if size != headSize {
				rows = append(rows, []any{int64(size), note})
			}
		}
		if _, err := owner.CopyFrom(ctx, pgx.Identifier{"tlog_checkpoints"}, []string{"size", "note"}, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
		if _, err := owner.Exec(ctx, `ANALYZE tlog_checkpoints`); err != nil {
			b.Fatal(err)
		}
		l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: testOrigin, Keys: benchKey(b)})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, l)
	})
}
