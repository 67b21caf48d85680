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
	"go.opentelemetry.io/otel/trace/noop"

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

// Attribute keys of the Guardian's spans. None carries params or payload
// content: params may be sealed at rest (ledger/paramcrypt), and a trace
// backend is not where they may leak to. Identifiers, dispositions and the
// policy's reasoning (which the ledger entry holds in clear) are carried.
var (
	attrSessionID   = attribute.Key("acs.session.id")
	attrAgentID     = attribute.Key("acs.agent.id")
	attrTurnID      = attribute.Key("acs.turn.id")
	attrMethod      = attribute.Key("acs.method")
	attrRequestID   = attribute.Key("acs.request_id")
	attrDecision    = attribute.Key("acs.decision")
	attrEvaluator   = attribute.Key("acs.evaluator")
	attrReasoning   = attribute.Key("acs.reasoning")
	attrReasonCodes = attribute.Key("acs.reason_codes")
	attrChainHash   = attribute.Key("acs.chain_hash")
	attrPosition    = attribute.Key("acsledger.position")
)

// stepSpanNames is the span name of each step, from the ACS-Trace
// OpenTelemetry mapping (docs/spec/trace/events.md). Methods the mapping
// does not name (MCP, unknown steps) get stepSpanDefault.
var stepSpanNames = map[string]string{
	"steps/sessionStart":           "acs.session",
	"steps/agentTrigger":           "acs.agent.trigger",
	"steps/userMessage":            "acs.message.user",
	"steps/agentResponse":          "acs.message.agent",
	"steps/toolCallRequest":        "gen_ai.tool.call",
	"steps/toolCallResult":         "gen_ai.tool.result",
	"steps/knowledgeRetrieval":     "acs.knowledge.retrieval",
	"steps/memoryStore":            "acs.memory.store",
	"steps/memoryContextRetrieval": "acs.memory.retrieval",
	"steps/sessionEnd":             "acs.session.end",
	"steps/turnStart":              "acs.turn",
	"steps/turnEnd":                "acs.turn.end",
	"steps/preCompact":             "acs.compact",
	"steps/postCompact":            "acs.compact.complete",
	"steps/subagentStart":          "acs.subagent",
	"steps/subagentStop":           "acs.subagent.end",
	"steps/skillRegister":          "acs.skill.register",
	"steps/skillLoad":              "acs.skill.load",
	"steps/skillUnload":            "acs.skill.unload",
	MethodAgbomSnapshot:            "acs.agbom",
	MethodAgbomChanged:             "acs.agbom",
}

const stepSpanDefault = "acs.step"

// startStep opens the ACS-Trace span of one step when TraceSteps is on;
// otherwise it returns ctx and a span that records nothing.
func (g *Guardian) startStep(ctx context.Context, req *request, s *session) (context.Context, trace.Span) {
	if !g.cfg.TraceSteps {
		return ctx, noop.Span{}
	}
	name, ok := stepSpanNames[req.method]
	if !ok {
		name = stepSpanDefault
	}
	attrs := []attribute.KeyValue{attrSessionID.String(s.id), attrAgentID.String(s.agentID), attrMethod.String(req.method), attrRequestID.String(req.requestID)}
	if req.turnID != "" {
		attrs = append(attrs, attrTurnID.String(req.turnID))
	}
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// decisionEvent records the answered decision on the step span (ACS-Trace:
// "each decision is a span event on the step span"). chainHash is empty
// when the ledger failed and the answer is the failure posture's.
func decisionEvent(span trace.Span, d Decision, chainHash string) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrDecision.String(string(d.Disposition)), attrEvaluator.String("deterministic")}
	if d.Reasoning != "" {
		attrs = append(attrs, attrReasoning.String(d.Reasoning))
	}
	if len(d.ReasonCodes) > 0 {
		attrs = append(attrs, attrReasonCodes.StringSlice(d.ReasonCodes))
	}
	if chainHash != "" {
		attrs = append(attrs, attrChainHash.String(chainHash))
	}
	span.AddEvent("acs.decision", trace.WithAttributes(attrs...))
}

// startPolicy opens the span of one policy evaluation.
func startPolicy(ctx context.Context, method string) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acs.policy.evaluate", trace.WithAttributes(attrMethodClass.String(methodClass(method))))
}

// endPolicy closes a policy span with its outcome.
func endPolicy(span trace.Span, d Decision, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "policy failed")
	} else {
		span.SetAttributes(attrDecision.String(string(d.Disposition)))
	}
	span.End()
}

// startAppend opens the span of the step's ledger transaction (entry,
// params, replay key and signed answer in one commit).
func startAppend(ctx context.Context) (context.Context, trace.Span) {
	return tracer.Start(ctx, "acsledger.ledger.append", trace.WithSpanKind(trace.SpanKindClient))
}

// endAppend closes an append span with the position the entry took.
func endAppend(span trace.Span, position int64, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "append failed")
	} else {
		span.SetAttributes(attrPosition.Int64(position))
	}
	span.End()
}
