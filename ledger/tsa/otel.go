package tsa

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics of time-stamping. Providers are the global ones (no-ops until
// the program installs real ones); the result label takes "stamped" or
// "failed", nothing else.
const instrumentationName = "github.com/acsledger/acsledger/ledger/tsa"

var (
	meter = otel.Meter(instrumentationName)

	requests, _ = meter.Int64Counter("acsledger.tsa.requests",
		metric.WithDescription("Time-stamp requests to the RFC 3161 authority, by result."))
	unstampedGauge, _ = meter.Int64Gauge("acsledger.tsa.unstamped_checkpoints",
		metric.WithDescription("Signed checkpoints without a time-stamp after the last round (at least this many when it is 1 and a batch was full)."))
	unstampedSeconds, _ = meter.Float64Gauge("acsledger.tsa.unstamped_seconds",
		metric.WithUnit("s"), metric.WithDescription("How long checkpoints have waited unstamped: 0 when every checkpoint is stamped."))
	stampedSize, _ = meter.Int64Gauge("acsledger.tsa.stamped_tree_size",
		metric.WithDescription("Tree size of the largest time-stamped checkpoint."))
	lagLeaves, _ = meter.Int64Gauge("acsledger.tsa.lag_leaves",
		metric.WithDescription("Leaves the latest checkpoint is past the largest time-stamped one."))
)

var attrResult = attribute.Key("acsledger.result")

var (
	resultStamped = metric.WithAttributes(attrResult.String("stamped"))
	resultFailed  = metric.WithAttributes(attrResult.String("failed"))
)
