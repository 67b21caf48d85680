package evidence_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// BenchmarkBuild measures writing a 1,000-entry session's bundle beside
// the same-run baseline of only reading what it holds from the store (every
// entry, a page at a time, and the response beside each). The difference
// is the bundle's own cost: encoding and the policy and key members.
func BenchmarkBuild(b *testing.B) {
	ctx := context.Background()
	st, err := storeopen.Open(ctx, "sqlite:"+b.TempDir(), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	gs := st
	const n = 1000
	const session = "bench-session"
	for i := range n {
		entry := fmt.Sprintf(`{"entry_id":"e-%d","step_id":"r-%d","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:00Z","request_hash":"%064x","agent_id":"agent-7","decision":{"disposition":"allow","reason_codes":[],"policy_references":[{"policy_id":"p","policy_version":"1","rule_id":"r"}]}}`, i, i, i)
		_, _, err := gs.AppendRequest(ctx, ledger.Record{SessionID: session, AgentID: "agent-7", Entry: []byte(entry)}, fmt.Appendf(nil, `{"request_id":"r-%d"}`, i), ledger.Seen{RequestID: fmt.Sprintf("r-%d", i)}, func(a ledger.Appended) ([]byte, error) {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"type":"final","request_id":"r-%d","decision":"allow","chain_hash":"%s","signature":{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAAA"}}}`, i, i, a.EntryHash), nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("baseline-store-read", func(b *testing.B) {
		for b.Loop() {
			for e, err := range ledger.AllEntries(ctx, gs, session) {
				if err != nil {
					b.Fatal(err)
				}
				if _, err := gs.Response(ctx, session, e.Position); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := evidence.Build(ctx, gs, nil, session, io.Discard, evidence.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	})
	// With every step's params carried (export --params, and the online
	// check's bundle): the payloads' read and bytes on top of "build".
	b.Run("build-with-params", func(b *testing.B) {
		for b.Loop() {
			if _, err := evidence.Build(ctx, gs, nil, session, io.Discard, evidence.Options{IncludeParams: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	})
}
