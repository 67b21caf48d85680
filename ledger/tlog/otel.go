package tlog

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of the integrator: a span for each integration that adds leaves
// (acsledger.tlog.integrate) and for each checkpoint signing
// (acsledger.tlog.sign) below it. An idle poll makes no span. The tracer
// is the global provider's (a no-op until the program installs one).
const instrumentationName = "github.com/acsledger/acsledger/ledger/tlog"

var tracer = otel.Tracer(instrumentationName)

// Gauges of publication: the sizes of the latest signed and the latest
// published checkpoint (equal without a witness policy), whose difference
// is how far publication lags the log.
var (
	meter             = otel.Meter(instrumentationName)
	signedTreeSize, _ = meter.Int64Gauge("acsledger.tlog.signed_tree_size",
		metric.WithDescription("Tree size of the latest checkpoint the log signed."))
	integratedTreeSize, _ = meter.Int64Gauge("acsledger.tlog.integrated_tree_size",
		metric.WithDescription("Leaves the log has integrated (stored), signed or not."))
	publishedTreeSize, _ = meter.Int64Gauge("acsledger.tlog.published_tree_size",
		metric.WithDescription("Tree size of the latest published checkpoint: with a witness policy, the latest whose cosignatures satisfy it."))
)

// recordSigned and recordPublished set the publication gauges.
func recordSigned(ctx context.Context, size uint64) { signedTreeSize.Record(ctx, int64(size)) }
func recordPublished(ctx context.Context, size uint64) {
	publishedTreeSize.Record(ctx, int64(size))
}

var (
	attrLeaves   = attribute.Key("acsledger.tlog.leaves")
	attrTreeSize = attribute.Key("acsledger.tlog.tree_size")
)

// startIntegrate opens the span of one integration of n leaves from start.
func startIntegrate(ctx context.Context, start uint64, n int) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acsledger.tlog.integrate", trace.WithAttributes(attrLeaves.Int(n), attrTreeSize.Int64(int64(start)+int64(n))))
}

// startCatchUp opens the span of integrating a backlog in batches of up
// to limit leaves, each with its own checkpoint.
func startCatchUp(ctx context.Context, limit int) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acsledger.tlog.catch_up", trace.WithAttributes(attribute.Key("acsledger.tlog.batch_limit").Int(limit)))
}

// startSign opens the span of signing a checkpoint for a tree of size.
func startSign(ctx context.Context, size uint64) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acsledger.tlog.sign", trace.WithAttributes(attrTreeSize.Int64(int64(size))))
}

// endSpan closes span, marking it failed when err is not nil. Only the
// error's class goes on the span: storage errors can quote SQL.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
}
