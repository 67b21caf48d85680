package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/proccpu"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
)

// BenchmarkAppendRequest measures what the Guardian asks of the store for
// one decision: AppendRequest with its entry, signed response, params and
// replay key, from 1, 16 and 64 sessions at once (group commit), with
// durability on.
// Beside appends/s it reports the CPU per append of the database's
// backends (pg-cpu-us/append, from /proc; the server's background
// processes, whose work over a slow run says nothing of the appends, are
// left out), which a shared machine's load moves much less than the rate,
// and the mean group size.
//
//	go test ./ledger/pgstore -run '^$' -bench BenchmarkAppendRequest -benchtime 3200x
func BenchmarkAppendRequest(b *testing.B) {
	for _, sessions := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) { benchAppendRequest(b, sessions) })
	}
}

func benchAppendRequest(b *testing.B, sessions int) {
	ctx := context.Background()
	s := openStore(b, newDB(b), pgstore.Options{})
	params := func(n int) []byte {
		return fmt.Appendf(nil, `{"acs_version":"0.1.0","request_id":"r-%d","timestamp":"2026-12-01T13:00:00Z",`+
			`"metadata":{"agent_id":"bench-agent","session_id":"s"},"payload":{"tool":{"name":"bash"},`+
			`"arguments":{"command":{"value":"go test ./... -run TestParse -count=1","provenance":{"provenance_id":"p-%d","origin":"agent_generated"}}}},`+
			`"signature":{"alg":"HMAC-SHA256","kid":"bench","value":"%s"}}`, n, n, strings.Repeat("A", 43))
	}
	sign := func(a ledger.Appended) ([]byte, error) {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"result":{"decision":"allow","chain_hash":%q,"position":%d,"reasoning":"%s"}}`,
			a.EntryHash, a.Position, strings.Repeat("r", 600)), nil
	}
	run := fmt.Sprint(time.Now().UnixNano())
	// Each session's first entry (which creates it) is not measured.
	for w := range sessions {
		id := fmt.Sprintf("%s-%d", run, w)
		if _, err := s.Append(ctx, ledger.Record{SessionID: id, AgentID: "bench-agent", Entry: benchEntry(int64(-1 - w)), Writer: ledger.WriterGuardian}); err != nil {
			b.Fatal(err)
		}
	}
	pids := func() []int {
		rows, err := s.Pool().Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
		if err != nil {
			b.Fatal(err)
		}
		ps, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		return ps
	}
	cpu0 := map[int]time.Duration{}
	for _, pid := range pids() {
		cpu0[pid] = proccpu.Of(pid)
	}
	c0 := s.Commits()
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for w := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%d", run, w)
			for i := w; i < b.N; i += sessions {
				r := ledger.Record{SessionID: id, Entry: benchEntry(int64(i))}
				seen := ledger.Seen{RequestID: fmt.Sprintf("r-%d", i), Nonce: fmt.Sprintf("n-%d", i), At: time.Now()}
				if _, _, err := s.AppendRequest(ctx, r, params(i), seen, sign); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	var pg time.Duration
	for _, pid := range pids() {
		pg += proccpu.Of(pid) - cpu0[pid]
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	if pg > 0 {
		b.ReportMetric(float64(pg.Microseconds())/float64(b.N), "pg-cpu-us/append")
	}
	if n := s.Commits() - c0; n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "appends/commit")
	}
}
