package guardian_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acsledger/acsledger/guardian"
)

// TestTelemetry: answered requests are counted by method class and
// outcome, with labels from fixed sets.
func TestTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	e := newErrEnv(t, nil, true)
	decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPing, map[string]any{}, nil)))
	decode(t, e.tp.send(t, []byte(`{"jsonrpc":`)))
	decode(t, e.tp.send(t, e.a.envelope(t, "steps/madeUpHook", map[string]any{}, nil)))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
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
	for _, want := range []string{"ping allow", "unknown Parse error", "unknown Method not found"} {
		if got[want] != 1 {
			t.Errorf("requests{%s} = %d; all: %v", want, got[want], got)
		}
	}
}
