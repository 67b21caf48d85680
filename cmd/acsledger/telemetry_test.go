package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/bench"
	"github.com/acsledger/acsledger/internal/telemetry"
)

// otlpReceiver is an OTLP/HTTP collector on a loopback port: it decodes
// every ExportTraceServiceRequest posted to /v1/traces and keeps its spans
// with their resource's service.name.
type otlpReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service map[string]bool
	metrics int // requests to /v1/metrics
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{service: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body, err := readOTLPBody(req)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s body: %v", req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.service[a.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.metrics++
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func readOTLPBody(req *http.Request) ([]byte, error) {
	var rd io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	}
	return io.ReadAll(rd)
}

func (r *otlpReceiver) snapshot() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func attr(as []*commonpb.KeyValue, key string) string {
	for _, a := range as {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// otelEnvFor is the test's environment with OTEL_* pointed at endpoint and
// short export intervals.
func otelEnvFor(endpoint string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, envACSTrace+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_METRIC_EXPORT_INTERVAL=500", "OTEL_SERVICE_NAME=acsledger-otel-test")
	return append(env, extra...)
}

// agentFor opens a signed session against a server started in dir with
// its embedded store in dir/data.
func agentFor(t *testing.T, s *server, dataDir string) *acsagent.Session {
	t.Helper()
	key, err := acsagent.HMACKey(defaultKeysDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	a, err := acsagent.New(s.url, "otel-agent", key, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Open(t.Context(), map[string]any{}); err != nil {
		t.Fatalf("open: %v\n%s", err, s.log())
	}
	return a
}

// TestTracingOTLP runs `acsledger serve --acs-trace` with its OTLP
// endpoint at a local receiver, makes one signed decision, and checks that
// the decision's trace arrives: the request span, the ACS-Trace step span
// with the acs.decision event carrying the disposition, and the policy
// evaluation and ledger append below it, in one trace; the Merkle log's
// integration and signing in their own; and no params in any attribute.
func TestTracingOTLP(t *testing.T) {
	recv := newOTLPReceiver(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := startIn(t, dir, otelEnvFor(recv.srv.URL), "serve", "--addr", "127.0.0.1:0", "--db", data, "--acs-trace")
	a := agentFor(t, s, data)
	call := bench.Calls[3] // rm -rf /: the baseline denies it
	r, _, err := a.Send(t.Context(), "steps/toolCallRequest", acsagent.ToolCall(call.Tool, call.Args))
	if err != nil || r.Decision != string(guardian.Deny) {
		t.Fatalf("decision %+v, %v; want deny", r, err)
	}

	byName := func(spans []*tracepb.Span, name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, sp := range spans {
			if sp.Name == name {
				out = append(out, sp)
			}
		}
		return out
	}
	var spans []*tracepb.Span
	var step *tracepb.Span
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans = recv.snapshot()
		step = nil
		for _, sp := range byName(spans, "gen_ai.tool.call") {
			if attr(sp.Attributes, "acs.request_id") == r.RequestID {
				step = sp
			}
		}
		if step != nil && signedAtLeast(spans, 2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the receiver has %d spans, none a gen_ai.tool.call for request %s and a checkpoint signing\n%s", len(spans), r.RequestID, s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	if got := attr(step.Attributes, "acs.session.id"); got != a.ID {
		t.Errorf("step span acs.session.id = %q, want %q", got, a.ID)
	}
	if got := attr(step.Attributes, "acs.agent.id"); got != "otel-agent" {
		t.Errorf("step span acs.agent.id = %q", got)
	}
	var decisions []*tracepb.Span_Event
	for _, ev := range step.Events {
		if ev.Name == "acs.decision" {
			decisions = append(decisions, ev)
		}
	}
	if len(decisions) != 1 {
		t.Fatalf("step span has %d acs.decision events, want 1: %v", len(decisions), step.Events)
	}
	ev := decisions[0].Attributes
	if got := attr(ev, "acs.decision"); got != "deny" {
		t.Errorf("acs.decision = %q, want deny", got)
	}
	if got := attr(ev, "acs.evaluator"); got != "deterministic" {
		t.Errorf("acs.evaluator = %q, want deterministic", got)
	}
	if got := attr(ev, "acs.reasoning"); got != r.Reasoning || got == "" {
		t.Errorf("acs.reasoning = %q, the answer's is %q", got, r.Reasoning)
	}
	if got := attr(ev, "acs.chain_hash"); got != r.ChainHash {
		t.Errorf("acs.chain_hash = %q, the answer's is %q", got, r.ChainHash)
	}

	// One trace: acs.request -> step -> {policy, append}.
	inTrace := map[string]*tracepb.Span{}
	for _, sp := range spans {
		if string(sp.TraceId) == string(step.TraceId) {
			inTrace[sp.Name] = sp
		}
	}
	parentOf := map[string]string{"gen_ai.tool.call": "acs.request", "acs.policy.evaluate": "gen_ai.tool.call", "acsledger.ledger.append": "gen_ai.tool.call"}
	for child, parent := range parentOf {
		c, p := inTrace[child], inTrace[parent]
		switch {
		case c == nil || p == nil:
			t.Errorf("trace %s lacks %s or %s; has %v", hex.EncodeToString(step.TraceId), child, parent, keysOf(inTrace))
		case string(c.ParentSpanId) != string(p.SpanId):
			t.Errorf("%s's parent is %x, want %s's %x", child, c.ParentSpanId, parent, p.SpanId)
		}
	}
	if req := inTrace["acs.request"]; req != nil {
		if req.Kind != tracepb.Span_SPAN_KIND_SERVER || attr(req.Attributes, "acs.outcome") != "deny" {
			t.Errorf("acs.request: kind %v, acs.outcome %q; want server, deny", req.Kind, attr(req.Attributes, "acs.outcome"))
		}
		if len(req.ParentSpanId) != 0 {
			t.Errorf("acs.request has a parent %x though the agent sent no traceparent", req.ParentSpanId)
		}
	}
	if pol := inTrace["acs.policy.evaluate"]; pol != nil && attr(pol.Attributes, "acs.decision") != "deny" {
		t.Errorf("acs.policy.evaluate acs.decision = %q, want deny", attr(pol.Attributes, "acs.decision"))
	}

	// Anchoring runs in the integrator's own traces: an integration with
	// the signing of its checkpoint below it, up to a tree holding the
	// decision's entry (sessionStart and the tool call make two leaves).
	var anchored int64
	for _, sign := range byName(spans, "acsledger.tlog.sign") {
		for _, in := range byName(spans, "acsledger.tlog.integrate") {
			if string(in.SpanId) == string(sign.ParentSpanId) && string(in.TraceId) == string(sign.TraceId) {
				for _, kv := range sign.Attributes {
					if kv.Key == "acsledger.tlog.tree_size" {
						anchored = max(anchored, kv.GetValue().GetIntValue())
					}
				}
			}
		}
	}
	if anchored < 2 {
		t.Errorf("no acsledger.tlog.sign below an acsledger.tlog.integrate for a tree of 2 or more leaves (largest: %d)", anchored)
	}

	// Nothing of the params leaves in a span or event attribute.
	for _, sp := range spans {
		all := append([]*commonpb.KeyValue(nil), sp.Attributes...)
		for _, e := range sp.Events {
			all = append(all, e.Attributes...)
		}
		for _, kv := range all {
			if v := kv.GetValue().String(); strings.Contains(v, "rm -rf") {
				t.Errorf("span %s attribute %s carries the params: %s", sp.Name, kv.Key, v)
			}
		}
	}
	recv.mu.Lock()
	if !recv.service["acsledger-otel-test"] {
		t.Errorf("no span from service.name acsledger-otel-test (OTEL_SERVICE_NAME); saw %v", recv.service)
	}
	recv.mu.Unlock()

	// An agent's W3C traceparent makes the request a child of its span.
	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	env, err := a.Envelope("steps/toolCallRequest", a.Params(acsagent.ToolCall(bench.Calls[0].Tool, bench.Calls[0].Args)))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL(), bytes.NewReader(env))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline = time.Now().Add(30 * time.Second)
	for found := false; !found; {
		for _, sp := range byName(recv.snapshot(), "acs.request") {
			if hex.EncodeToString(sp.TraceId) == agentTrace {
				found = true
				if hex.EncodeToString(sp.ParentSpanId) != agentSpan {
					t.Errorf("acs.request in the agent's trace has parent %x, want the agent's span %s", sp.ParentSpanId, agentSpan)
				}
			}
		}
		if !found && time.Now().After(deadline) {
			t.Fatalf("no acs.request span in the agent's trace %s after 30s", agentTrace)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Metrics go out over OTLP too, and /metrics still serves them.
	deadline = time.Now().Add(15 * time.Second)
	for {
		recv.mu.Lock()
		n := recv.metrics
		recv.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no OTLP metrics export in 15s\n%s", s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := get(t, s.url+"/metrics"); code != 200 || !strings.Contains(string(body), `acs_guardian_requests_total{acs_method_class="steps/toolCallRequest",acs_outcome="deny"`) {
		t.Errorf("/metrics: %d, no deny toolCallRequest count\n%s", code, body)
	}
	s.stop(t, syscall.SIGTERM)
}

// signedAtLeast reports whether a checkpoint signing for a tree of at
// least n leaves is among spans.
func signedAtLeast(spans []*tracepb.Span, n int64) bool {
	for _, sp := range spans {
		if sp.Name != "acsledger.tlog.sign" {
			continue
		}
		for _, kv := range sp.Attributes {
			if kv.Key == "acsledger.tlog.tree_size" && kv.GetValue().GetIntValue() >= n {
				return true
			}
		}
	}
	return false
}

func keysOf(m map[string]*tracepb.Span) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestTracingBlackHole: an OTLP endpoint that accepts connections and
// never answers slows no decision and fails none; its failures are counted
// in /metrics and logged (throttled), and shutdown is bounded.
func TestTracingBlackHole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	stopHole := make(chan struct{})
	t.Cleanup(func() { close(stopHole); ln.Close(); held.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Hold the connection open, read nothing, answer nothing.
			held.Go(func() { <-stopHole; c.Close() })
		}
	}()

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := startIn(t, dir, otelEnvFor("http://"+ln.Addr().String(), "OTEL_EXPORTER_OTLP_TIMEOUT=5000", envACSTrace+"=true"),
		"serve", "--addr", "127.0.0.1:0", "--db", data)
	a := agentFor(t, s, data)

	const n = 20
	t0 := time.Now()
	var slowest time.Duration
	for i := range n {
		c := bench.Calls[i%len(bench.Calls)]
		t1 := time.Now()
		r, _, err := a.Send(t.Context(), "steps/toolCallRequest", acsagent.ToolCall(c.Tool, c.Args))
		if err != nil || r.Decision != string(c.Want) {
			t.Fatalf("decision %d: %+v, %v; want %s\n%s", i, r, err, c.Want, s.log())
		}
		slowest = max(slowest, time.Since(t1))
	}
	el := time.Since(t0)
	t.Logf("%d decisions in %v, slowest %v, with the OTLP endpoint a black hole", n, el, slowest)
	// Each export waits 5s for the black hole (OTEL_EXPORTER_OTLP_TIMEOUT):
	// a decision that waited on one would take that long. The bound leaves
	// room for a loaded machine.
	if slowest > 3*time.Second || el > 30*time.Second {
		t.Errorf("%d decisions took %v, the slowest %v: tracing held up decisions", n, el, slowest)
	}

	failures := regexp.MustCompile(`(?m)^acsledger_telemetry_errors_total(\{[^}]*\})? ([1-9][0-9]*)$`)
	// The first export gives up after its retries (15s at most).
	deadline := time.Now().Add(45 * time.Second)
	for {
		_, body := get(t, s.url+"/metrics")
		if failures.Match(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed export counted in /metrics after 45s\n%s", s.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(s.log(), `msg="opentelemetry export failed"`) {
		t.Errorf("the failed export was not logged:\n%s", s.log())
	}

	t1 := time.Now()
	s.stop(t, syscall.SIGTERM)
	if el := time.Since(t1); el > telemetry.ShutdownGrace+10*time.Second {
		t.Errorf("shutdown took %v with the collector a black hole", el)
	}
}
