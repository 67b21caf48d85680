package bench

import (
	"context"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// BenchmarkGuardianPgBouncer measures the Guardian's HMAC-signed
// toolCallRequest decisions (as BenchmarkGuardianToolCall's guardian, 64
// sessions) with the ledger on one private PostgreSQL server reached
// directly (the same-run baseline), directly with the statement mode
// the store takes behind PgBouncer (default_query_exec_mode=cache_describe,
// to tell that cost from the pooler's), and through a pgbouncer in
// transaction pooling mode with 20 server connections (PgBouncer's
// default_pool_size; the store opens at most 10), as the writer login
// with ?pgbouncer=transaction (docs/storage.md, "Through PgBouncer").
// They alternate, three rounds each (go test's -count would run one three
// times before the next), each on a database of its own on the same
// server.
//
//	go test ./internal/bench -run '^$' -bench BenchmarkGuardianPgBouncer -benchtime 3000x
func BenchmarkGuardianPgBouncer(b *testing.B) {
	ps := pgtest.NewServer(b)
	bouncer := ps.NewPgBouncerSized(b, "transaction", 20, pgstore.WriterRole)
	for range 3 {
		for _, via := range []string{"direct", "direct-cache-describe", "pgbouncer-transaction"} {
			b.Run(via, func(b *testing.B) { benchGuardianVia(b, ps, bouncer, via) })
		}
	}
}

// benchGuardianVia is one round of BenchmarkGuardianPgBouncer.
func benchGuardianVia(b *testing.B, ps *pgtest.Server, bouncer *pgtest.PgBouncer, via string) {
	ctx := context.Background()
	url := ps.NewDatabase(b)
	if err := storeopen.Migrate(ctx, url); err != nil {
		b.Fatal(err)
	}
	switch via {
	case "direct-cache-describe":
		url += "&default_query_exec_mode=cache_describe"
	case "pgbouncer-transaction":
		// The writer role exists once a database is migrated.
		ps.Exec(b, "ALTER ROLE "+pgstore.WriterRole+" LOGIN")
		url = pgtest.WithUser(b, bouncer.URL(b, url), pgstore.WriterRole) + "&pgbouncer=transaction"
	}
	store, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bg, err := ServeGuardian(ctx, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bg.Close()
	r, err := DriveGuardian(ctx, bg.URL, bg.Key, benchSessions, time.Hour, int64(b.N), b.ResetTimer)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if r.ErrorCount() > 0 {
		b.Fatalf("%d errors (%s); first: %v", r.ErrorCount(), Counts(r.Errors), r.FirstErr)
	}
	if r.Decisions != b.N {
		b.Fatalf("%d decisions for b.N = %d", r.Decisions, b.N)
	}
	b.ReportMetric(r.Rate(), "decisions/s")
	b.ReportMetric(float64(r.Percentile(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(r.Percentile(0.50).Microseconds())/1000, "p50-ms")
}
