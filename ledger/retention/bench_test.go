package retention_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/ledger/retention/retentiontest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// timedStore times every erasing transaction of a sweep.
type timedStore struct {
	retention.Store
	longest atomic.Int64
	batches atomic.Int64
}

func (s *timedStore) EraseBatch(ctx context.Context, kind string, sc ledger.PayloadScope, from ledger.Cursor, limit int, runID, reason, by string) (ledger.Batch, error) {
	t := time.Now()
	b, err := s.Store.EraseBatch(ctx, kind, sc, from, limit, runID, reason, by)
	d := int64(time.Since(t))
	for {
		old := s.longest.Load()
		if d <= old || s.longest.CompareAndSwap(old, d) {
			break
		}
	}
	s.batches.Add(1)
	return b, err
}

// benchPayloads is how many old payloads the sweep benchmark erases:
// 20,000, or $ACSLEDGER_BENCH_SWEEP_PAYLOADS (ACSLEDGER_BENCH_10M=1 asks
// for 10,000,000, which takes hours to load on the 2-core box).
func benchPayloads(b *testing.B) int {
	if os.Getenv("ACSLEDGER_BENCH_10M") != "" {
		return 10_000_000
	}
	if v := os.Getenv("ACSLEDGER_BENCH_SWEEP_PAYLOADS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("ACSLEDGER_BENCH_SWEEP_PAYLOADS=%q", v)
		}
		return n
	}
	return 20_000
}

// guardianLoad appends Guardian steps (AppendRequest, params and a
// response, the Guardian's store path) from writers sessions until stop
// is closed, and returns how many it appended and a wait for its writers
// to return, which the caller calls after closing stop and before closing
// the store.
func guardianLoad(b testing.TB, st storeopen.Store, tag string, writers int, stop <-chan struct{}) (*atomic.Int64, func()) {
	n := new(atomic.Int64)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d-%d", tag, w, i)
				e := fmt.Appendf(nil, `{"entry_id":"%s","step_id":"%s","step_type":"steps/toolCallRequest","timestamp":"2026-12-02T00:00:00.000Z"}`, id, id)
				_, _, err := st.AppendRequest(ctx, ledger.Record{SessionID: fmt.Sprintf("%s-%d", tag, w), AgentID: "live-agent", Entry: e},
					[]byte(`{"payload":{"tool":"x"}}`), ledger.Seen{RequestID: id, At: time.Now()},
					func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
				if err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	return n, wg.Wait
}

// rate runs the Guardian's load for d and returns appends per second.
func rate(b *testing.B, st storeopen.Store, tag string, d time.Duration) float64 {
	stop := make(chan struct{})
	t := time.Now()
	n, wait := guardianLoad(b, st, tag, 16, stop)
	time.Sleep(d)
	close(stop)
	r := float64(n.Load()) / time.Since(t).Seconds()
	wait()
	return r
}

// BenchmarkSweepGuardianRate measures the Guardian's append rate (16
// sessions, AppendRequest) while a sweep erases the old payloads, beside
// the same load without a sweep just before and after (same run), and the
// longest erasing transaction. Durability stays on.
//
//	go test -run '^$' -bench SweepGuardianRate -benchtime 1x ./ledger/retention
func BenchmarkSweepGuardianRate(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			db := retentiontest.NewStore(b, kind)
			n := benchPayloads(b)
			retentiontest.SeedExpired(b, db, n, 64, "old", "old-agent")
			st, err := storeopen.Open(ctx, db, ledger.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			pause := 0 * time.Millisecond
			if v := os.Getenv("ACSLEDGER_BENCH_SWEEP_PAUSE"); v != "" {
				if pause, err = time.ParseDuration(v); err != nil {
					b.Fatal(err)
				}
			}
			duty := 0.0
			if v := os.Getenv("ACSLEDGER_BENCH_SWEEP_DUTY"); v != "" {
				if duty, err = strconv.ParseFloat(v, 64); err != nil {
					b.Fatal(err)
				}
			} else if kind == "sqlite" {
				duty = retention.EmbeddedDuty
			} else {
				duty = retention.PostgresDuty // as serve sweeps
			}
			ts := &timedStore{Store: st}
			svc := retention.New(ts, retention.Options{Pause: pause, Duty: duty})
			if _, err := svc.SetRule(ctx, ledger.Rule{Name: "day", Period: 24 * time.Hour, Reason: "bench"}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				before := rate(b, st, fmt.Sprintf("before%d", i), 3*time.Second)
				stop := make(chan struct{})
				t0 := time.Now()
				load, wait := guardianLoad(b, st, fmt.Sprintf("during%d", i), 16, stop)
				reps, err := svc.Sweep(ctx)
				took := time.Since(t0)
				close(stop)
				during := float64(load.Load()) / took.Seconds()
				wait()
				if err != nil {
					b.Fatal(err)
				}
				after := rate(b, st, fmt.Sprintf("after%d", i), 3*time.Second)
				erased := int64(0)
				for _, r := range reps {
					erased += r.Erased
				}
				if i == 0 && erased != int64(n) {
					b.Fatalf("the sweep erased %d of %d", erased, n)
				}
				base := (before + after) / 2
				b.ReportMetric(during, "appends/s_during_sweep")
				b.ReportMetric(base, "appends/s_without")
				b.ReportMetric(during/base, "ratio")
				b.ReportMetric(float64(erased)/took.Seconds(), "erased/s")
				b.ReportMetric(float64(ts.longest.Load())/1e6, "longest_tx_ms")
				b.ReportMetric(took.Seconds(), "sweep_s")
				b.ReportMetric(duty, "duty")
			}
		})
	}
}
