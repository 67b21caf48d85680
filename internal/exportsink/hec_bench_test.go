package exportsink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// BenchmarkHECDelivery delivers a whole ledger as in
// BenchmarkFileDelivery, to the loopback HEC indexer of the tests
// (hecindexer_test.go: it indexes a post as soon as its goroutine runs,
// so the figure is the sink's own cost and its acknowledgement polling,
// not Splunk's indexing latency), beside the same-run raw NDJSON write of
// BenchmarkFileDelivery.
//
//	go test ./internal/exportsink -run '^$' -bench BenchmarkHECDelivery -benchtime 3x
func BenchmarkHECDelivery(b *testing.B) {
	n := benchEntries(b)
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	h := newHECIndexer(b, map[string]bool{hecToken: true})
	h.countOnly = true
	var ours, raw time.Duration
	var nEvents int
	for i := range b.N {
		took, events := deliverAll(b, l, n, fmt.Sprintf("splunk%d", i), h.url(hecToken, ""))
		ours += took
		nEvents = events
		raw += rawNDJSON(b, l, n, b.TempDir())
	}
	h.mu.Lock()
	indexed := h.nIndexed
	h.mu.Unlock()
	if indexed < b.N*nEvents {
		b.Fatalf("%d events indexed, %d acknowledged", indexed, b.N*nEvents)
	}
	reportDelivery(b, n, nEvents, ours, raw)
}
