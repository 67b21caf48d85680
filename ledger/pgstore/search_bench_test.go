package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// BenchmarkSearch measures the compliance reads the store serves from its
// search projection and chains (a page of entries, a page since a time, a
// page of sessions, one session's entries) over 6,000 entries in 200
// sessions. It uses only the store's public API, so the same file runs on
// an older tree for a same-sitting A/B (docs/benchmarks.md, issue 20).
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, newDB(b), pgstore.Options{})
	var rs []ledger.Record
	for i := range 6000 {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s-%03d", i%200), Entry: storetest.Synthetic(i, "")})
	}
	for from := 0; from < len(rs); from += 1000 {
		if _, err := s.AppendBatch(ctx, rs[from:from+1000]); err != nil {
			b.Fatal(err)
		}
	}
	since := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"entries", func() error { _, err := s.SearchEntries(ctx, ledger.SearchFilter{Limit: 100}); return err }},
		{"entries-since", func() error {
			_, err := s.SearchEntries(ctx, ledger.SearchFilter{Since: since, Limit: 100})
			return err
		}},
		{"sessions", func() error { _, err := s.SearchSessions(ctx, ledger.SearchFilter{Limit: 100}); return err }},
		{"session-entries", func() error { _, err := s.Entries(ctx, "s-007", 0, 100); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
