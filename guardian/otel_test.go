package guardian_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
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

// spanRecorder is the one recorder this package's tests read spans
// through: the global TracerProvider, like the MeterProvider (see
// metricsReader), binds the package's tracer to the first provider set.
var spanRecorder = sync.OnceValue(func() *tracetest.SpanRecorder {
	r := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r)))
	return r
})

// failingStore fails AppendRequest while fail is set, as a database that
// went away would.
type failingStore struct {
	guardian.Store
	fail atomic.Bool
}

func (s *failingStore) AppendRequest(ctx context.Context, r ledger.Record, params []byte, seen ledger.Seen, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	if s.fail.Load() {
		return ledger.Appended{}, nil, errors.New("connection refused")
	}
	return s.Store.AppendRequest(ctx, r, params, seen, sign)
}

func attrOf(attrs []attribute.KeyValue, k string) (string, bool) {
	for _, a := range attrs {
		if string(a.Key) == k {
			return a.Value.String(), true
		}
	}
	return "", false
}

// spansOfRequest returns the ended spans of the trace holding the step span
// or, without step spans, the policy span of the request with that
// request_id, by name.
func spansOfRequest(t *testing.T, requestID string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	ended := spanRecorder().Ended()
	var trace [16]byte
	found := false
	for _, s := range ended {
		if id, ok := attrOf(s.Attributes(), "acs.request_id"); ok && id == requestID {
			trace, found = s.SpanContext().TraceID(), true
		}
	}
	out := map[string]sdktrace.ReadOnlySpan{}
	if !found {
		return out
	}
	for _, s := range ended {
		if s.SpanContext().TraceID() == trace {
			out[s.Name()] = s
		}
	}
	return out
}

// TestTraceSteps: with TraceSteps, a step is a span named by the ACS-Trace
// mapping under the request's span, with the policy evaluation and the
// ledger append below it and the answered decision as its acs.decision
// event; when the ledger fails, the event is the failure posture's deny.
func TestTraceSteps(t *testing.T) {
	spanRecorder()
	var st *failingStore
	e := newErrEnv(t, func(c *guardian.Config) {
		c.TraceSteps = true
		st = &failingStore{Store: c.Store}
		c.Store = st
		c.Policy = &guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1", Rules: []guardian.TestRule{
			{ID: "no-rm", Tool: "rm", Decision: guardian.Decision{Disposition: guardian.Deny, Reasoning: "rm is not allowed", ReasonCodes: []string{"destructive"}}},
			{ID: "rest", Decision: guardian.Decision{Disposition: guardian.Allow}},
		}}
	}, true)

	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("rm"), nil)))
	mustResult(t, r)
	spans := spansOfRequest(t, r.str("request_id"))
	step, req, pol, app := spans["gen_ai.tool.call"], spans["acs.request"], spans["acs.policy.evaluate"], spans["acsledger.ledger.append"]
	if step == nil || req == nil || pol == nil || app == nil {
		t.Fatalf("the request's trace lacks a span; has %v", names(spans))
	}
	if step.Parent().SpanID() != req.SpanContext().SpanID() || pol.Parent().SpanID() != step.SpanContext().SpanID() || app.Parent().SpanID() != step.SpanContext().SpanID() {
		t.Error("want acs.request -> gen_ai.tool.call -> {acs.policy.evaluate, acsledger.ledger.append}")
	}
	for k, want := range map[string]string{"acs.session.id": e.a.sessionID, "acs.agent.id": e.a.agentID, "acs.method": "steps/toolCallRequest"} {
		if got, _ := attrOf(step.Attributes(), k); got != want {
			t.Errorf("step span %s = %q, want %q", k, got, want)
		}
	}
	if got, _ := attrOf(pol.Attributes(), "acs.decision"); got != "deny" {
		t.Errorf("policy span acs.decision = %q", got)
	}
	ev := decisionEvents(t, step)
	for k, want := range map[string]string{"acs.decision": "deny", "acs.evaluator": "deterministic", "acs.reasoning": "rm is not allowed", "acs.reason_codes": `["destructive"]`, "acs.chain_hash": r.str("chain_hash")} {
		if got, _ := attrOf(ev, k); got != want {
			t.Errorf("acs.decision event %s = %q, want %q", k, got, want)
		}
	}

	st.fail.Store(true)
	r = decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("ls"), nil)))
	if r.decision() != "deny" {
		t.Fatalf("with the ledger down the answer is %v, want the posture's deny", r)
	}
	spans = spansOfRequest(t, r.str("request_id"))
	if app := spans["acsledger.ledger.append"]; app == nil || app.Status().Code != codes.Error {
		t.Errorf("the failed append's span is missing or not failed: %v", spans)
	}
	ev = decisionEvents(t, spans["gen_ai.tool.call"])
	if got, _ := attrOf(ev, "acs.decision"); got != "deny" {
		t.Errorf("acs.decision = %q with the ledger down, want deny", got)
	}
	if h, ok := attrOf(ev, "acs.chain_hash"); ok {
		t.Errorf("acs.chain_hash %q for an answer that published none", h)
	}
}

// TestTraceStepsOff: without TraceSteps there is no step span and no
// acs.decision event; the policy and append spans hang off the request's.
func TestTraceStepsOff(t *testing.T) {
	spanRecorder()
	e := newErrEnv(t, nil, true)
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("ls"), nil)))
	mustResult(t, r)
	spans := spansOfRequest(t, r.str("request_id"))
	req, pol, app := spans["acs.request"], spans["acs.policy.evaluate"], spans["acsledger.ledger.append"]
	if req == nil || pol == nil || app == nil {
		t.Fatalf("the request's trace lacks a span; has %v", names(spans))
	}
	if len(spans) != 3 {
		t.Errorf("the request's trace has %v, want only the request, policy and append spans", names(spans))
	}
	if pol.Parent().SpanID() != req.SpanContext().SpanID() || app.Parent().SpanID() != req.SpanContext().SpanID() {
		t.Error("want acs.request -> {acs.policy.evaluate, acsledger.ledger.append}")
	}
	for _, s := range spans {
		for _, ev := range s.Events() {
			if ev.Name == "acs.decision" {
				t.Errorf("an acs.decision event on %s without TraceSteps", s.Name())
			}
		}
	}
}

func decisionEvents(t *testing.T, s sdktrace.ReadOnlySpan) []attribute.KeyValue {
	t.Helper()
	if s == nil {
		t.Fatal("no step span")
	}
	var out [][]attribute.KeyValue
	for _, ev := range s.Events() {
		if ev.Name == "acs.decision" {
			out = append(out, ev.Attributes)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d acs.decision events on %s, want 1", len(out), s.Name())
	}
	return out[0]
}

func names(m map[string]sdktrace.ReadOnlySpan) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	return n
}
