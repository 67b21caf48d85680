package exportsink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// benchEntries is the ledger size of the delivery benchmarks;
// ACSLEDGER_BENCH_EXPORT_ENTRIES sets another.
func benchEntries(b *testing.B) int {
	n := 20000
	if v := os.Getenv("ACSLEDGER_BENCH_EXPORT_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("ACSLEDGER_BENCH_EXPORT_ENTRIES=%q", v)
		}
	}
	return n
}

// BenchmarkFileDelivery delivers a whole ledger (embedded store, every
// fifth entry a deny with its Detection Finding) to the file sink, as
// OCSF, through a Deliverer with its durable cursor, beside the same-run
// baseline: the same pages read from the store and their entries written
// raw as NDJSON, fsynced per batch, with no encoding and no cursor.
//
//	go test ./internal/exportsink -run '^$' -bench BenchmarkFileDelivery -benchtime 3x
func BenchmarkFileDelivery(b *testing.B) {
	n := benchEntries(b)
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	ctx := context.Background()
	var ours, raw time.Duration
	var nEvents int
	for i := range b.N {
		dir := b.TempDir()
		// Ours.
		c, err := exportsink.Parse(fmt.Sprintf("lake%d", i), "file://"+dir, "ocsf")
		if err != nil {
			b.Fatal(err)
		}
		sink, err := exportsink.Open(c)
		if err != nil {
			b.Fatal(err)
		}
		counter := &countingSink{Sink: sink}
		d := &export.Deliverer{Name: c.Name, Store: l, Sink: counter, Encoder: export.Encoder{Format: trace.OCSF}, Poll: time.Millisecond}
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

		// Baseline: the same pages, raw.
		start = time.Now()
		f, err := os.Create(filepath.Join(dir, "raw.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		var buf []byte
		for from := uint64(0); from < uint64(n); from += 1000 {
			es, err := l.ExportEntries(ctx, ledger.ExportFilter{From: from, To: min(uint64(n), from+1000), Limit: 1000})
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
	b.ReportMetric(float64(b.N*n)/raw.Seconds(), "raw-entries/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio-to-raw")
}

// countingSink counts the events its sink took.
type countingSink struct {
	export.Sink
	n int
}

func (c *countingSink) Send(ctx context.Context, batch []export.Event) error {
	if err := c.Sink.Send(ctx, batch); err != nil {
		return err
	}
	c.n += len(batch)
	return nil
}
