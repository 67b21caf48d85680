package evidence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
)

// metricsReader is the one reader this package's tests read instruments
// through. OpenTelemetry's global MeterProvider binds instruments created
// before it was set to the first provider set, for good: a test that set
// its own provider would read nothing from its second run in a process
// (go test -count=2). The gauges hold the last run's values; the run
// counter only grows.
var metricsReader = sync.OnceValue(func() *sdkmetric.ManualReader {
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	return r
})

// TestScheduleMetrics runs re-verification on a schedule and reads its
// result back from the OpenTelemetry instruments, as an operator's
// collector would.
func TestScheduleMetrics(t *testing.T) {
	reader := metricsReader()

	f := evidencetest.New(t, "sqlite")
	// Without the log both sessions fail with not_anchored.
	r := evidence.NewReverifier(f.Store, nil, f.Options(), f.Trust(t), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Schedule(ctx, 10*time.Millisecond); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, last := r.Status(); last != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduled run finished")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				got[m.Name] = d.DataPoints[0].Value
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if v, _ := dp.Attributes.Value("acsledger.outcome"); v.AsString() == "findings" {
						got[m.Name+"{findings}"] += dp.Value
					}
				}
			}
		}
	}
	if got["acsledger.reverify.sessions_failed"] != 2 || got["acsledger.reverify.sessions"] != 2 || got["acsledger.reverify.runs{findings}"] < 1 {
		t.Errorf("metrics %v; want 2 failed of 2 sessions and at least one run with findings", got)
	}
}
