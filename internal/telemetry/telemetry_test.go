package telemetry

import (
	"strings"
	"testing"
)

// TestReadEnv: which signals are exported, and which settings are
// refused at start.
func TestReadEnv(t *testing.T) {
	for _, tc := range []struct {
		name            string
		env             map[string]string
		traces, metrics bool
		err             string
	}{
		{"nothing set", nil, false, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, true, ""},
		{"traces endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false, ""},
		{"traces off", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_EXPORTER": "none"}, false, true, ""},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_SDK_DISABLED": "true"}, false, false, ""},
		{"json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, true, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, false, "not gRPC"},
		{"grpc for traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, false, false, "not gRPC"},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, false, "otlp or not at all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ReadEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || e.Traces != tc.traces || e.Metrics != tc.metrics {
				t.Errorf("traces %v metrics %v err %v; want traces %v metrics %v", e.Traces, e.Metrics, err, tc.traces, tc.metrics)
			}
		})
	}
}
