package tlogpub_test

import (
	"context"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/s3test"
	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tlogpub"
)

// BenchmarkPublish: does publication keep up with the Merkle log? Each
// iteration appends 4,096 entries to a SQLite ledger (untimed), lets the
// log integrate and sign them (the same-run baseline: leaves integrated
// per second), then publishes the new checkpoint with its tiles and
// bundles to SeaweedFS over loopback (leaves and tiles published per
// second). -benchtime 16x crosses 65,536 leaves, so a full level-1 tile is
// published too.
func BenchmarkPublish(b *testing.B) {
	ctx := context.Background()
	w := s3test.Start(b, "log", s3test.Options{})
	b.Setenv("AWS_ACCESS_KEY_ID", w.Access)
	b.Setenv("AWS_SECRET_ACCESS_KEY", w.Secret)
	st := tlogdb.SQLite(b)
	skey, _, err := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("bench"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: tlogtest.Origin, Keys: []string{skey}, BatchSize: 4096})
	if err != nil {
		b.Fatal(err)
	}
	bk, err := tlogpub.Open("s3://log/bench?endpoint=http://" + w.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	p := tlogpub.New(l, bk, tlogpub.Config{})
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	const per = 4096
	var integrating, publishing time.Duration
	var leaves uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tlogdb.AppendSQLite(b, st, "s", int64(i)*per, per)
		b.StartTimer()
		t0 := time.Now()
		tlogtest.IntegrateAll(b, l)
		t1 := time.Now()
		size, err := p.Publish(ctx)
		if err != nil {
			b.Fatal(err)
		}
		publishing += time.Since(t1)
		integrating += t1.Sub(t0)
		leaves += per
		if size != leaves {
			b.Fatalf("published %d of %d leaves", size, leaves)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(leaves)/integrating.Seconds(), "leaves_integrated/s")
	b.ReportMetric(float64(leaves)/publishing.Seconds(), "leaves_published/s")
	b.ReportMetric(float64(p.Status().Tiles)/publishing.Seconds(), "tiles_published/s")
	b.ReportMetric(0, "ns/op")
}
