package guardian_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acsledger/acsledger/guardian"
)

// metricsReader is the one reader this package's tests read instruments
// through. OpenTelemetry's global MeterProvider binds instruments created
// before it was set to the first provider set, for good: a test that set
// its own provider would read nothing from its second run in a process
// (go test -count=2). Tests share this one and compare counts before and
// after what they do.
var metricsReader = sync.OnceValue(func() *sdkmetric.ManualReader {
	r := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	return r
})

// requestCounts reads acs.guardian.requests by "class outcome".
func requestCounts(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := metricsReader().Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "acs.guardian.requests" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				class, _ := dp.Attributes.Value("acs.method_class")
				outcome, _ := dp.Attributes.Value("acs.outcome")
				got[class.AsString()+" "+outcome.AsString()] += dp.Value
			}
		}
	}
	return got
}

// TestTelemetry: answered requests are counted by method class and
// outcome, with labels from fixed sets.
func TestTelemetry(t *testing.T) {
	before := requestCounts(t)
	e := newErrEnv(t, nil, true)
	decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPing, map[string]any{}, nil)))
	decode(t, e.tp.send(t, []byte(`{"jsonrpc":`)))
	decode(t, e.tp.send(t, e.a.envelope(t, "steps/madeUpHook", map[string]any{}, nil)))

	got := requestCounts(t)
	for _, want := range []string{"ping allow", "unknown Parse error", "unknown Method not found"} {
		if n := got[want] - before[want]; n != 1 {
			t.Errorf("requests{%s} went up by %d, want 1; all: %v", want, n, got)
		}
	}
}
