package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acsledger/acsledger/guardian"
)

// telemetryShutdownGrace bounds how long shutdown waits for the last spans
// and metrics to be exported: an unreachable collector must not hold up a
// restart.
const telemetryShutdownGrace = 5 * time.Second

// telemetry is what serve installs for OpenTelemetry: the Prometheus
// handler of /metrics, always, and an OTLP/HTTP exporter of traces and of
// metrics when the standard OTEL_* variables ask for one
// (docs/operations.md, "Tracing (OTLP)").
type telemetry struct {
	metrics  http.Handler
	shutdown []func(context.Context) error
	// tracing reports whether spans are exported.
	tracing bool
}

// otelEnv is the part of the OpenTelemetry environment acsledger reads
// itself. The exporters read the rest (endpoints, headers, timeouts,
// certificates, compression), the SDK the OTEL_BSP_*, OTEL_TRACES_SAMPLER*
// and OTEL_METRIC_EXPORT_* settings, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
type otelEnv struct {
	traces, metrics bool // an exporter is configured for the signal
}

// readOTelEnv says which signals go out over OTLP. A signal is exported
// when an endpoint for it is set (OTEL_EXPORTER_OTLP_ENDPOINT or the
// signal's own) and its OTEL_*_EXPORTER is unset or "otlp";
// OTEL_SDK_DISABLED=true or OTEL_*_EXPORTER=none turn it off. Any other
// exporter, or a protocol other than http/protobuf and http/json, is a
// configuration error reported at start.
func readOTelEnv(getenv func(string) string) (otelEnv, error) {
	var e otelEnv
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return e, nil
	}
	signal := func(name, upper string) (bool, error) {
		switch v := strings.TrimSpace(getenv("OTEL_" + upper + "_EXPORTER")); v {
		case "none":
			return false, nil
		case "", "otlp":
		default:
			return false, fmt.Errorf("OTEL_%s_EXPORTER=%q: acsledger exports %s over otlp or not at all (none)", upper, v, name)
		}
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+upper+"_ENDPOINT") == "" {
			return false, nil
		}
		p := getenv("OTEL_EXPORTER_OTLP_" + upper + "_PROTOCOL")
		if p == "" {
			p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if p != "" && p != "http/protobuf" && p != "http/json" {
			return false, fmt.Errorf("OTLP protocol %q for %s: acsledger speaks http/protobuf and http/json, not gRPC", p, name)
		}
		return true, nil
	}
	var err error
	if e.traces, err = signal("traces", "TRACES"); err != nil {
		return e, err
	}
	if e.metrics, err = signal("metrics", "METRICS"); err != nil {
		return e, err
	}
	return e, nil
}

// exportRetry bounds the retries of one failed export: a batch the
// collector keeps refusing is dropped after 15 seconds, and the batch
// processor's bounded queue drops what arrives meanwhile. Neither ever
// waits in a request.
var exportRetry = struct{ initial, max, elapsed time.Duration }{time.Second, 5 * time.Second, 15 * time.Second}

// newTelemetry sets up metrics (Prometheus, plus OTLP when configured) and
// tracing (OTLP when configured), installs them as the global providers,
// and routes OpenTelemetry's own errors (failed exports) to log, throttled,
// and to the acsledger.telemetry.errors counter.
func newTelemetry(ctx context.Context, getenv func(string) string, log *slog.Logger) (*telemetry, error) {
	env, err := readOTelEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	t := &telemetry{}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "acsledger"), attribute.String("service.version", guardian.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES leaves a partial resource.
		log.Warn("opentelemetry resource incomplete", "err", err)
	}
	var readers []sdkmetric.Reader
	if env.metrics {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{
			Enabled: true, InitialInterval: exportRetry.initial, MaxInterval: exportRetry.max, MaxElapsedTime: exportRetry.elapsed,
		}))
		if err != nil {
			return nil, fmt.Errorf("couldn't set up the OTLP metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.NewPeriodicReader(exp))
	}
	handler, stopMetrics, err := newMetrics(readers...)
	if err != nil {
		return nil, err
	}
	t.metrics = handler
	t.shutdown = append(t.shutdown, stopMetrics)

	failures, _ := otel.Meter("github.com/acsledger/acsledger/cmd/acsledger").Int64Counter("acsledger.telemetry.errors",
		metric.WithDescription("OpenTelemetry errors, such as span or metric batches the collector did not take; they never fail a decision."))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		failures.Add(context.Background(), 1)
		log.Warn("opentelemetry export failed", "err", err)
	}))

	if env.traces {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: exportRetry.initial, MaxInterval: exportRetry.max, MaxElapsedTime: exportRetry.elapsed,
		}))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("couldn't set up the OTLP trace exporter: %w", err), t.stop(ctx))
		}
		// The batch processor never blocks a span's end: past its queue
		// (OTEL_BSP_MAX_QUEUE_SIZE, 2048 by default) spans are dropped.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagation.TraceContext{})
		t.shutdown = append(t.shutdown, tp.Shutdown)
		t.tracing = true
	}
	log.Info("telemetry", "metrics", "/metrics", "otlp_metrics", env.metrics, "otlp_traces", env.traces)
	return t, nil
}

// stop flushes and shuts down the exporters, within telemetryShutdownGrace
// whatever the collector does.
func (t *telemetry) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryShutdownGrace)
	defer cancel()
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	return errors.Join(errs...)
}
