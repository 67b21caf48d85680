package exportsink_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// BenchmarkParquetDelivery delivers a whole ledger (embedded store, every
// fifth entry a deny with its Detection Finding) to the Parquet sink in a
// directory, as OCSF through a Deliverer with its durable cursor, in the
// sink's own batches (20,000 entries), beside the same-run baseline: the
// same pages read from the store and their entries written raw as
// NDJSON, fsynced per page, with no encoding and no cursor.
//
//	go test ./internal/exportsink -run '^$' -bench BenchmarkParquetDelivery -benchtime 2x
func BenchmarkParquetDelivery(b *testing.B) {
	n := benchEntries(b)
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	ctx := context.Background()
	var ours, raw time.Duration
	var nEvents int
	var lakeBytes int64
	for i := range b.N {
		dir := b.TempDir()
		c, err := exportsink.Parse(fmt.Sprintf("lake%d", i), "parquet://"+dir, "ocsf")
		if err != nil {
			b.Fatal(err)
		}
		sink, err := exportsink.Open(c)
		if err != nil {
			b.Fatal(err)
		}
		batch := sink.(interface{ BatchSize() int }).BatchSize()
		counter := &countingSink{Sink: sink}
		d := &export.Deliverer{Name: c.Name, Store: l, Sink: counter, Encoder: export.Encoder{Format: trace.OCSF},
			Batch: batch, Poll: time.Millisecond, Timeout: time.Minute}
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		start := time.Now()
		go func() { d.Run(rctx); close(stopped) }()
		for d.Status().NextLeaf < uint64(n) {
			time.Sleep(time.Millisecond)
		}
		ours += time.Since(start)
		cancel()
		<-stopped
		nEvents = counter.n
		lakeBytes = 0
		filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if fi, err := e.Info(); err == nil {
					lakeBytes += fi.Size()
				}
			}
			return nil
		})

		// Baseline: the same pages, raw.
		start = time.Now()
		f, err := os.Create(filepath.Join(b.TempDir(), "raw.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		var buf []byte
		for from := uint64(0); from < uint64(n); from += uint64(batch) {
			es, err := l.ExportEntries(ctx, ledger.ExportFilter{From: from, To: min(uint64(n), from+uint64(batch)), Limit: batch})
			if err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
			for _, e := range es {
				buf = append(append(buf, e.Content...), '\n')
			}
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
		raw += time.Since(start)
	}
	b.ReportMetric(float64(b.N*n)/ours.Seconds(), "entries/s")
	b.ReportMetric(float64(b.N*nEvents)/ours.Seconds(), "events/s")
	b.ReportMetric(float64(lakeBytes)/float64(nEvents), "parquet-bytes/event")
	b.ReportMetric(float64(b.N*n)/raw.Seconds(), "raw-entries/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio-to-raw")
}
