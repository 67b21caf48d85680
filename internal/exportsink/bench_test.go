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
	var ours, raw time.Duration
	var nEvents int
	for i := range b.N {
		dir := b.TempDir()
		took, events := deliverAll(b, l, n, fmt.Sprintf("lake%d", i), "file://"+dir)
		ours += took
		nEvents = events
		raw += rawNDJSON(b, l, n, dir)
	}
	reportDelivery(b, n, nEvents, ours, raw)
}

// BenchmarkRELPDelivery delivers a whole ledger as in
// BenchmarkFileDelivery, over RELP to a real rsyslogd (imrelp) that
// acknowledges a message once its line is written (startRELP: direct
// queues, omfile flushed per message), beside the same-run raw NDJSON
// write of BenchmarkFileDelivery.
//
//	go test ./internal/exportsink -run '^$' -bench BenchmarkRELPDelivery -benchtime 3x
func BenchmarkRELPDelivery(b *testing.B) {
	n := benchEntries(b)
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	r := startRELP(b, nil)
	var ours, raw time.Duration
	var nEvents int
	for i := range b.N {
		took, events := deliverAll(b, l, n, fmt.Sprintf("siem%d", i), fmt.Sprintf("relp://127.0.0.1:%d", r.port))
		ours += took
		nEvents = events
		raw += rawNDJSON(b, l, n, b.TempDir())
	}
	reportDelivery(b, n, nEvents, ours, raw)
}

// BenchmarkRELPSend is the RELP sink alone: the events of a whole ledger,
// encoded beforehand, sent in batches of 1000 to the rsyslogd of
// BenchmarkRELPDelivery, each batch acknowledged in full before the
// next; beside it, the same-run baseline writes the same events' JSON as
// NDJSON to a file, fsynced per batch.
//
//	go test ./internal/exportsink -run '^$' -bench BenchmarkRELPSend -benchtime 3x
func BenchmarkRELPSend(b *testing.B) {
	n := benchEntries(b)
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	ctx := context.Background()
	es, err := l.ExportEntries(ctx, ledger.ExportFilter{From: 0, To: uint64(n), Limit: n})
	if err != nil {
		b.Fatal(err)
	}
	var events []export.Event
	for _, e := range es {
		evs, err := export.Encoder{Format: trace.OCSF}.Events(e)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, evs...)
	}
	r := startRELP(b, nil)
	c, err := exportsink.Parse("siem", fmt.Sprintf("relp://127.0.0.1:%d", r.port), "ocsf")
	if err != nil {
		b.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	var ours, raw time.Duration
	var buf []byte
	for range b.N {
		start := time.Now()
		for i := 0; i < len(events); i += 1000 {
			if err := sink.Send(ctx, events[i:min(len(events), i+1000)]); err != nil {
				b.Fatal(err)
			}
		}
		ours += time.Since(start)

		start = time.Now()
		f, err := os.Create(filepath.Join(b.TempDir(), "raw.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(events); i += 1000 {
			buf = buf[:0]
			for _, e := range events[i:min(len(events), i+1000)] {
				buf = append(append(buf, e.JSON...), '\n')
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
	b.ReportMetric(float64(b.N*len(events))/ours.Seconds(), "events/s")
	b.ReportMetric(float64(b.N*len(events))/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio-to-raw")
}

// deliverAll runs a Deliverer from the start of l to the sink url (as
// OCSF, with a fresh cursor named name) until its n entries are
// acknowledged; it returns how long that took and how many events went.
func deliverAll(b *testing.B, l *exporttest.Ledger, n int, name, url string) (time.Duration, int) {
	c, err := exportsink.Parse(name, url, "ocsf")
	if err != nil {
		b.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		b.Fatal(err)
	}
	counter := &countingSink{Sink: sink}
	d := &export.Deliverer{Name: c.Name, Store: l, Sink: counter, Encoder: export.Encoder{Format: trace.OCSF}, Poll: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	start := time.Now()
	go func() { d.Run(ctx); close(stopped) }()
	for d.Status().NextLeaf < uint64(n) {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	<-stopped
	return took, counter.n
}

// rawNDJSON is the baseline: the same pages read from the store and their
// entries written raw as NDJSON to a file in dir, fsynced per page of
// 1000, with no encoding and no cursor.
func rawNDJSON(b *testing.B, l *exporttest.Ledger, n int, dir string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	f, err := os.Create(filepath.Join(dir, "raw.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
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
	return time.Since(start)
}

func reportDelivery(b *testing.B, n, nEvents int, ours, raw time.Duration) {
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
