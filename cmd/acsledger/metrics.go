package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

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
