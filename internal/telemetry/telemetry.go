// Package telemetry sets up OpenTelemetry for acsledger serve and the
// stdio Guardian: the Prometheus handler of /metrics, always, and OTLP/HTTP
// exporters of traces and metrics when the standard OTEL_* variables ask
// for them (docs/operations.md, "Tracing (OTLP)"). The packages create
// their instruments and tracers through the global providers it installs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acsledger/acsledger/guardian"
)

// ShutdownGrace bounds how long shutdown waits for the last spans
// and metrics to be exported: an unreachable collector must not hold up a
// restart.
const ShutdownGrace = 5 * time.Second

// Telemetry is what serve installs for OpenTelemetry: the Prometheus
// handler of /metrics, always, and an OTLP/HTTP exporter of traces and of
// metrics when the standard OTEL_* variables ask for one
// (docs/operations.md, "Tracing (OTLP)").
type Telemetry struct {
	// Metrics serves /metrics.
	Metrics  http.Handler
	shutdown []func(context.Context) error
	// Tracing reports whether spans are exported.
	Tracing bool
}

// Env is the part of the OpenTelemetry environment acsledger reads
// itself. The exporters read the rest (endpoints, headers, timeouts,
// certificates, compression), the SDK the OTEL_BSP_*, OTEL_TRACES_SAMPLER*
// and OTEL_METRIC_EXPORT_* settings, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
type Env struct {
	Traces, Metrics bool // an exporter is configured for the signal
}

// ReadEnv says which signals go out over OTLP. A signal is exported
// when an endpoint for it is set (OTEL_EXPORTER_OTLP_ENDPOINT or the
// signal's own) and its OTEL_*_EXPORTER is unset or "otlp";
// OTEL_SDK_DISABLED=true or OTEL_*_EXPORTER=none turn it off. Any other
// exporter, or a protocol other than http/protobuf and http/json, is a
// configuration error reported at start.
func ReadEnv(getenv func(string) string) (Env, error) {
	var e Env
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
	if e.Traces, err = signal("traces", "TRACES"); err != nil {
		return e, err
	}
	if e.Metrics, err = signal("metrics", "METRICS"); err != nil {
		return e, err
	}
	return e, nil
}

// exportRetry bounds the retries of one failed export: a batch the
// collector keeps refusing is dropped after 15 seconds, and the batch
// processor's bounded queue drops what arrives meanwhile. Neither ever
// waits in a request.
var exportRetry = struct{ initial, max, elapsed time.Duration }{time.Second, 5 * time.Second, 15 * time.Second}

// New sets up metrics (Prometheus, plus OTLP when env says so) and
// tracing (OTLP when env says so), installs them as the global providers,
// and routes OpenTelemetry's own errors (failed exports) to log, throttled,
// and to the acsledger.telemetry.errors counter.
func New(ctx context.Context, env Env, log *slog.Logger) (*Telemetry, error) {
	t := &Telemetry{}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "acsledger"), attribute.String("service.version", guardian.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES leaves a partial resource.
		log.Warn("opentelemetry resource incomplete", "err", err)
	}
	var readers []sdkmetric.Reader
	if env.Metrics {
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
	t.Metrics = handler
	t.shutdown = append(t.shutdown, stopMetrics)

	failures, _ := otel.Meter("github.com/acsledger/acsledger/cmd/acsledger").Int64Counter("acsledger.telemetry.errors",
		metric.WithDescription("OpenTelemetry errors, such as span or metric batches the collector did not take; they never fail a decision."))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		failures.Add(context.Background(), 1)
		log.Warn("opentelemetry export failed", "err", err)
	}))

	if env.Traces {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: exportRetry.initial, MaxInterval: exportRetry.max, MaxElapsedTime: exportRetry.elapsed,
		}))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("couldn't set up the OTLP trace exporter: %w", err), t.Stop(ctx))
		}
		// The batch processor never blocks a span's end: past its queue
		// (OTEL_BSP_MAX_QUEUE_SIZE, 2048 by default) spans are dropped.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagation.TraceContext{})
		t.shutdown = append(t.shutdown, tp.Shutdown)
		t.Tracing = true
	}
	log.Info("telemetry", "metrics", "/metrics", "otlp_metrics", env.Metrics, "otlp_traces", env.Traces)
	return t, nil
}

// Stop flushes and shuts down the exporters, within ShutdownGrace
// whatever the collector does.
func (t *Telemetry) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	return errors.Join(errs...)
}

// newMetrics installs an OpenTelemetry meter provider whose instruments
// (the Guardian's decisions, the ledger's re-verification runs, ...) are
// served in the Prometheus text format by the returned handler, and read
// by the further readers given (the OTLP exporter's, when configured).
// The packages create their instruments through the global provider,
// which forwards to this one once it is set.
func newMetrics(readers ...sdkmetric.Reader) (http.Handler, func(context.Context) error, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't set up metrics: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	for _, r := range readers {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(mp)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), mp.Shutdown, nil
}
