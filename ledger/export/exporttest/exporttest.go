// Package exporttest makes small ledgers to export from in tests: a
// throwaway embedded store holding real, chained ACS entries, every one
// integrated into the Merkle log.
package exporttest

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// Ledger is a store under test with its Merkle log.
type Ledger struct {
	*sqlitestore.Store
	Log *tlog.Log
	// Hashes are the entry hashes (hex) in leaf order.
	Hashes []string
	n      int
}

// New opens an empty ledger in a temporary directory.
func New(t testing.TB) *Ledger {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Ledger{Store: st, Log: tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{})}
}

// Entry is the i-th entry of the ledgers this package makes: a tool call
// whose decision is deny every fifth entry, allow otherwise.
func Entry(i int) []byte {
	disp := "allow"
	if i%5 == 4 {
		disp = "deny"
	}
	return fmt.Appendf(nil, `{"entry_id":"00000000-0000-4000-8000-%012d","step_id":"step-%d","step_type":"steps/toolCallRequest",`+
		`"timestamp":"2026-12-02T04:%02d:%02d.000Z","decision":{"disposition":%q,"reasoning":"test entry %d"}}`,
		i, i, (i/60)%60, i%60, disp, i)
}

// Append appends n more entries, spread over sessions of agent team-a/bot
// and team-b/bot, in one batch, then integrates them.
func (l *Ledger) Append(t testing.TB, n int) {
	t.Helper()
	rs := make([]ledger.Record, n)
	for k := range n {
		i := l.n + k
		team := "a"
		if i%3 == 2 {
			team = "b"
		}
		rs[k] = ledger.Record{SessionID: fmt.Sprintf("sess-%s-%d", team, i/50), AgentID: "team-" + team + "/bot", Entry: Entry(i)}
	}
	if _, err := l.AppendBatch(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	l.n += n
	tlogtest.IntegrateAll(t, l.Log)
	for len(l.Hashes) < l.n {
		es, err := l.ExportEntries(context.Background(), ledger.ExportFilter{From: uint64(len(l.Hashes)), To: uint64(l.n), Limit: ledger.MaxExportPage})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			l.Hashes = append(l.Hashes, hex.EncodeToString(e.EntryHash[:]))
		}
	}
	if len(l.Hashes) != l.n {
		t.Fatalf("%d leaves for %d entries", len(l.Hashes), l.n)
	}
}
