package replay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
)

// stepsPerSession is the chain length of every session of the benchmark
// ledgers.
const stepsPerSession = 5

// benchLedger returns a store of n sessions of stepsPerSession entries
// each; the step_id of session i's step k is "r-i-k".
func benchLedger(b *testing.B, kind string, n int) ledger.Store {
	b.Helper()
	ctx := context.Background()
	st := emptyLedger(b, kind)
	var rs []ledger.Record
	for i := range n {
		for k := range stepsPerSession {
			rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("sess-%04d", i), AgentID: "agent-7", Entry: fmt.Appendf(nil,
				`{"entry_id":"e-%d-%d","step_id":"r-%d-%d","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:00Z","request_hash":"%064x"}`,
				i, k, i, k, i*stepsPerSession+k)})
		}
	}
	if _, err := st.AppendBatch(ctx, rs); err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkFindEntry looks a request id up without its session in a
// ledger of 10 sessions and in one of 1,000, alternating within each
// iteration so that both figures come from the same moments of a noisy
// machine. One indexed lookup costs about the same in both. The
// scan-1000 sub-benchmark is the lookup FindEntry did before
// ledger.Store.EntriesByStep: read every session's chain.
func BenchmarkFindEntry(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			small, large := benchLedger(b, kind, 10), benchLedger(b, kind, 1000)
			find := func(st ledger.Store, requestID, wantSession string) time.Duration {
				start := time.Now()
				e, err := replay.FindEntry(ctx, st, requestID, "")
				d := time.Since(start)
				if err != nil || e.SessionID != wantSession || e.Position != 2 {
					b.Fatalf("%s: %+v, %v", requestID, e, err)
				}
				return d
			}
			b.Run("index", func(b *testing.B) {
				var inSmall, inLarge time.Duration
				for b.Loop() {
					inSmall += find(small, "r-5-2", "sess-0005")
					inLarge += find(large, "r-500-2", "sess-0500")
				}
				n := float64(b.N)
				b.ReportMetric(float64(inSmall.Nanoseconds())/n, "ns/find-10")
				b.ReportMetric(float64(inLarge.Nanoseconds())/n, "ns/find-1000")
				b.ReportMetric(float64(inLarge)/float64(inSmall), "x-1000/10")
			})
			b.Run("scan-1000", func(b *testing.B) {
				for b.Loop() {
					if e, err := scanFor(ctx, large, "r-500-2"); err != nil || e.SessionID != "sess-0500" {
						b.Fatalf("scan: %+v, %v", e, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/find-1000")
			})
		})
	}
}

// scanFor is the lookup FindEntry made before the stores indexed step_id
// alone: every chain of the ledger, read a page at a time.
func scanFor(ctx context.Context, st ledger.Store, requestID string) (ledger.Entry, error) {
	var found *ledger.Entry
	f := ledger.SessionFilter{Limit: ledger.MaxPageSize}
	for {
		page, err := st.Sessions(ctx, f)
		if err != nil {
			return ledger.Entry{}, err
		}
		for _, s := range page.Sessions {
			for e, err := range ledger.AllEntries(ctx, st, s.SessionID) {
				if err != nil {
					return ledger.Entry{}, err
				}
				if e.StepID == requestID {
					if found != nil {
						return ledger.Entry{}, replay.ErrAmbiguous
					}
					found = &e
				}
			}
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if found == nil {
		return ledger.Entry{}, errors.New("not found")
	}
	return *found, nil
}

// BenchmarkReplay replays every step of the evidence fixture (two
// sessions, six steps under the baseline) from a SQLite ledger: find the
// entry, read and check the params, rebuild the input from the earlier
// entries and their params, evaluate, compare.
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	f := evidencetest.New(b, "sqlite")
	for b.Loop() {
		for _, s := range f.Steps {
			res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: s.RequestID, SessionID: s.SessionID})
			if err != nil || !res.Same {
				b.Fatalf("replay %s: %+v, %v", s.RequestID, res, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(f.Steps)), "ns/replay")
}
