package guardian

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// Telemetry of the Guardian. Providers are the global ones (no-ops until
// the program installs real ones). Labels come from fixed sets: the method
// class, the disposition, and the registered name of an error code.
const instrumentationName = "github.com/acsledger/acsledger/guardian"

var (
	tracer = otel.Tracer(instrumentationName)
	meter  = otel.Meter(instrumentationName)

	requestsCounter, _ = meter.Int64Counter("acs.guardian.requests",
		metric.WithDescription("Requests answered, by method class and outcome (a disposition or an error code name)."))
	durationHistogram, _ = meter.Float64Histogram("acs.guardian.request.duration",
		metric.WithUnit("s"), metric.WithDescription("Time to answer one request, batch elements counted one by one."))
)

var (
	attrMethodClass = attribute.Key("acs.method_class")
	attrOutcome     = attribute.Key("acs.outcome")
)

// methodClass maps a method to a label from a fixed set.
func methodClass(m string) string {
	if _, ok := lookupMethod(m); !ok {
		return "unknown"
	}
	switch {
	case m == MethodHello:
		return "handshake"
	case m == MethodPing:
		return "ping"
	case strings.HasPrefix(m, "steps/"):
		return m
	case strings.HasPrefix(m, mcpPrefix), strings.HasPrefix(m, wrappedMCPPrefix):
		return "mcp"
	case strings.HasPrefix(m, "agbom/"):
		return m
	}
	return "other"
}

// startRequest opens the span of one request.
func startRequest(ctx context.Context) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acs.request", trace.WithSpanKind(trace.SpanKindServer))
}

// observe records one answered request.
func observe(ctx context.Context, span trace.Span, method string, seconds float64, answer []byte) {
	var a struct {
		Result struct {
			Decision string `json:"decision"`
		} `json:"result"`
		Error *struct {
			Code rpcerr.Code `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &a)
	outcome := a.Result.Decision
	if a.Error != nil {
		outcome = a.Error.Code.Name()
		if outcome == "" {
			outcome = "error"
		}
		span.SetStatus(codes.Error, outcome)
	}
	if outcome == "" {
		outcome = "handshake"
	}
	attrs := metric.WithAttributes(attrMethodClass.String(methodClass(method)), attrOutcome.String(outcome))
	requestsCounter.Add(ctx, 1, attrs)
	durationHistogram.Record(ctx, seconds, attrs)
	span.SetAttributes(attrMethodClass.String(methodClass(method)), attrOutcome.String(outcome))
}
