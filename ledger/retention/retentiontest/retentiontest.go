// Package retentiontest fills a store with expired request params for
// the retention tests and benchmarks of ledger/retention and
// cmd/acsledger.
package retentiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// NewStore returns the URL of an empty store of kind: "sqlite", the
// embedded store in a temporary directory, or "postgres", a migrated
// throwaway database.
func NewStore(tb testing.TB, kind string) string {
	tb.Helper()
	if kind != "postgres" {
		return "sqlite:" + tb.TempDir()
	}
	db := pgtest.NewDatabase(tb)
	if err := storeopen.Migrate(context.Background(), db); err != nil {
		tb.Fatal(err)
	}
	return db
}

// SeedExpired appends n Guardian steps with request params to the store
// at db, from writers goroutines, each to its own session (prefix-00,
// prefix-01, ...) of agent, recorded two days ago by the store's clock so
// that a one-day rule covers every one.
func SeedExpired(tb testing.TB, db string, n, writers int, prefix, agent string) {
	tb.Helper()
	ctx := context.Background()
	st, err := storeopen.Open(ctx, db, ledger.Options{Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for s := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < n; i += writers {
				e := fmt.Appendf(nil, `{"entry_id":"e-%d","step_id":"r-%d","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:00.000Z"}`, i, i)
				_, _, err := st.AppendRequest(ctx, ledger.Record{SessionID: fmt.Sprintf("%s-%02d", prefix, s), AgentID: agent, Entry: e},
					fmt.Appendf(nil, `{"payload":{"customer":"name %d"}}`, i), ledger.Seen{RequestID: fmt.Sprintf("r-%d", i), At: time.Now()},
					func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}
