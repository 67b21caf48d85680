package bench

import (
	"context"

	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// BenchmarkGuardianExport measures the Guardian's decision rate (64
// sessions, HMAC, baseline policy, PostgreSQL with synchronous_commit=on,
// the Merkle log integrating as in serve) with no sink, with one syslog
// sink delivering every entry as OCSF to a TCP receiver that reads and
// discards, and with one dead syslog sink (nothing listens), alternating
// in one run. It reports each rate and the ratios to no sink: delivery
// reads the ledger behind the Guardian and must not slow it.
//
//	go test ./internal/bench -run '^$' -bench BenchmarkGuardianExport -benchtime 3000x -count 1
func BenchmarkGuardianExport(b *testing.B) {
	ctx := context.Background()
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c)
		}
	}()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	run := func(b *testing.B, sinkURL string) (rate float64, delivered int64) {
		store := newPGStore(b)
		skey, _, err := tlog.GenerateKey(nil, "bench.example/log", tlog.Ed25519)
		if err != nil {
			b.Fatal(err)
		}
		mlog, err := tlog.New(ctx, store.LogStorage(), tlog.Config{Origin: "bench.example/log", Keys: []string{skey}})
		if err != nil {
			b.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		go func() { mlog.Run(rctx); done <- struct{}{} }()
		var d *export.Deliverer
		if sinkURL != "" {
			c, err := exportsink.Parse("bench", sinkURL, "ocsf")
			if err != nil {
				b.Fatal(err)
			}
			s, err := exportsink.Open(c)
			if err != nil {
				b.Fatal(err)
			}
			d = &export.Deliverer{Name: "bench", Store: store, Sink: s, Encoder: export.Encoder{Format: trace.OCSF, Origin: "bench.example/log"},
				Timeout: 2 * time.Second}
			go func() { d.Run(rctx); done <- struct{}{} }()
		} else {
			done <- struct{}{}
		}
		bg, err := ServeGuardian(ctx, storeopen.NotifyOnAppend(store, mlog.Notify), nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := DriveGuardian(ctx, bg.URL, bg.Key, benchSessions, time.Hour, int64(b.N), func() {})
		if err != nil {
			b.Fatal(err)
		}
		if r.ErrorCount() > 0 || r.Decisions != b.N {
			b.Fatalf("%d decisions, %d errors (%s): %v", r.Decisions, r.ErrorCount(), Counts(r.Errors), r.FirstErr)
		}
		if d != nil {
			delivered = d.Status().SentUnconfirmed // plain syslog confirms nothing
		}
		stop()
		<-done
		<-done
		bg.Close()
		return r.Rate(), delivered
	}
	rounds := 3
	if v := os.Getenv("ACSLEDGER_BENCH_ROUNDS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			rounds = n
		}
	}
	b.ResetTimer()
	// Alternate, in a rotating order, to spread the box's noise over all
	// three.
	urls := []string{"", "syslog+tcp://" + sink.Addr().String(), "syslog+tcp://" + deadAddr}
	rates := make([]float64, 3)
	var delivered int64
	for r := range rounds {
		for k := range 3 {
			i := (k + r) % 3
			rate, dl := run(b, urls[i])
			rates[i] += rate / float64(rounds)
			delivered += dl
		}
	}
	b.StopTimer()
	none, withSink, withDead := rates[0], rates[1], rates[2]
	b.ReportMetric(none, "decisions/s-no-sink")
	b.ReportMetric(withSink, "decisions/s-syslog-sink")
	b.ReportMetric(withDead, "decisions/s-dead-sink")
	b.ReportMetric(withSink/none, "ratio-syslog")
	b.ReportMetric(withDead/none, "ratio-dead")
	b.ReportMetric(float64(delivered)/float64(rounds*b.N), "delivered-during-run")
}
