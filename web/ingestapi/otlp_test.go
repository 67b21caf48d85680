package ingestapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web"
)

// tap keeps a copy of every OTLP request body the server is sent, so a
// test can replay one as a retrying exporter or Collector would.
type tap struct {
	h      http.Handler
	mu     sync.Mutex
	bodies [][]byte
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/traces" {
		b, _ := io.ReadAll(r.Body)
		tp.mu.Lock()
		tp.bodies = append(tp.bodies, b)
		tp.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	tp.h.ServeHTTP(w, r)
}

// agentRun emits, with the OpenTelemetry Go SDK and its OTLP/HTTP
// exporter, a small agent run: an invoke_agent span with two execute_tool
// children, as the GenAI semantic conventions name them. It returns the
// trace id and the spans as the SDK ended them.
func agentRun(t *testing.T, endpoint string) (trace.TraceID, []sdktrace.ReadOnlySpan, *otlptrace.Exporter) {
	t.Helper()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + ingestToken}),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "travel-agent"))),
		sdktrace.WithSpanProcessor(rec),
		sdktrace.WithBatcher(exp),
	)
	tr := tp.Tracer("example.com/travel-agent", trace.WithInstrumentationVersion("0.3.1"))
	ctx, agent := tr.Start(ctx, "invoke_agent booking", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.id", "agt-booking-7"),
		attribute.String("gen_ai.agent.name", "booking"),
		attribute.String("gen_ai.conversation.id", "conv-42"),
		attribute.String("gen_ai.provider.name", "openai"),
		// Personal data: it must stay in the sealed source record.
		attribute.String("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Book Alice Example a flight to Oslo"}]}]`),
	))
	for i, tool := range []string{"search_flights", "book_flight"} {
		_, span := tr.Start(ctx, "execute_tool "+tool, trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.call.id", fmt.Sprintf("call_%d", i)),
			attribute.String("gen_ai.tool.type", "function"),
			attribute.String("gen_ai.tool.call.arguments", `{"passenger":"Alice Example"}`),
		))
		span.End()
	}
	// A span of no GenAI operation: the ledger does not keep it.
	_, http := tr.Start(ctx, "GET /flights")
	http.End()
	agent.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatalf("the SDK's export: %v", err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return agent.SpanContext().TraceID(), rec.Ended(), exp
}

// TestOTLPSDKProducer: a run emitted by the OpenTelemetry Go SDK through
// its OTLP/HTTP exporter arrives as three entries of one session, in span
// end order, each with its span sealed beside it as the source record;
// the session's bundle verifies; a replayed request and a re-export add
// nothing.
func TestOTLPSDKProducer(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			tp := &tap{h: web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store}})}
			srv := httptest.NewServer(tp)
			defer srv.Close()

			traceID, spans, exp := agentRun(t, srv.URL)
			session := "otel-genai:" + traceID.String()
			es, err := f.Store.Entries(ctx, session, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []struct{ stepType, tool string }{
				{"ingest/otel-genai/span/execute_tool", "search_flights"},
				{"ingest/otel-genai/span/execute_tool", "book_flight"},
				{"ingest/otel-genai/span/invoke_agent", ""},
			}
			if len(es) != len(want) {
				t.Fatalf("session %s has %d entries, want %d", session, len(es), len(want))
			}
			byName := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range spans {
				byName[s.Name()] = s
			}
			for i, e := range es {
				var got struct {
					StepType     string `json:"step_type"`
					Timestamp    string `json:"timestamp"`
					SourceFormat string `json:"source_format"`
					SourceSHA256 string `json:"source_sha256"`
					Span         struct {
						TraceID string `json:"trace_id"`
						SpanID  string `json:"span_id"`
						Name    string `json:"name"`
					} `json:"span"`
					GenAI struct {
						ToolName string `json:"tool_name"`
						AgentID  string `json:"agent_id"`
					} `json:"gen_ai"`
				}
				if err := json.Unmarshal(e.Content, &got); err != nil {
					t.Fatal(err)
				}
				if got.StepType != want[i].stepType || got.GenAI.ToolName != want[i].tool || got.SourceFormat != "otel-genai" {
					t.Errorf("entry %d: %s", i, e.Content)
				}
				if bytes.Contains(e.Content, []byte("Alice")) {
					t.Errorf("entry %d holds personal data from an attribute: %s", i, e.Content)
				}
				sdk := byName[got.Span.Name]
				if sdk == nil || got.Span.SpanID != sdk.SpanContext().SpanID().String() || got.Span.TraceID != traceID.String() {
					t.Errorf("entry %d names span %+v, which the SDK did not end", i, got.Span)
					continue
				}
				if got.Timestamp != sdk.EndTime().UTC().Format("2006-01-02T15:04:05.999999999Z07:00") {
					t.Errorf("entry %d: timestamp %s, the span ended %s", i, got.Timestamp, sdk.EndTime().UTC())
				}
				// The sealed source record is the span, whole, as OTLP
				// protobuf: resource, scope and every attribute.
				src, err := f.Store.Source(ctx, session, int64(i))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(src); hex.EncodeToString(sum[:]) != got.SourceSHA256 {
					t.Errorf("entry %d: source_sha256 %s is not the source record's", i, got.SourceSHA256)
				}
				var td tracepb.TracesData
				if err := proto.Unmarshal(src, &td); err != nil {
					t.Fatal(err)
				}
				sp := td.ResourceSpans[0].ScopeSpans[0].Spans[0]
				if hex.EncodeToString(sp.SpanId) != got.Span.SpanID || td.ResourceSpans[0].ScopeSpans[0].Scope.GetName() != "example.com/travel-agent" ||
					td.ResourceSpans[0].Resource.Attributes[0].GetValue().GetStringValue() != "travel-agent" || len(sp.Attributes) != len(sdk.Attributes()) {
					t.Errorf("entry %d: source record %v", i, &td)
				}
			}
			if agent := es[2].Content; !bytes.Contains(agent, []byte(`"agent_id":"agt-booking-7"`)) || !bytes.Contains(agent, []byte(`"conversation_id":"conv-42"`)) {
				t.Errorf("the invoke_agent entry: %s", agent)
			}

			f.Integrate(t)
			var buf bytes.Buffer
			sum, err := evidence.Build(ctx, f.Store, f.Log, session, &buf, f.Options())
			if err != nil || !sum.Anchored || sum.Entries != 3 || sum.AnchoredThrough != 3 {
				t.Fatalf("bundle of %s: %+v, %v", session, sum, err)
			}
			rep, err := verify.VerifyBundle(&buf, f.Trust(t))
			if err != nil || !rep.Verified() {
				t.Fatalf("the bundle does not verify: %v %+v", err, rep)
			}

			// The exporter's request again, byte for byte, as a retry
			// sends it: every span a duplicate, nothing added.
			if len(tp.bodies) != 1 {
				t.Fatalf("the SDK sent %d requests, want 1", len(tp.bodies))
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/traces", bytes.NewReader(tp.bodies[0]))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := authed.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer coltracepb.ExportTraceServiceResponse
			if err := proto.Unmarshal(body, &answer); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("replay: %d %q %v", resp.StatusCode, body, err)
			}
			if got := resp.Header.Get("Acsledger-Ingest"); got != "accepted=0 duplicate=3 quarantined=0 skipped=1" {
				t.Errorf("replay: %s", got)
			}
			if answer.PartialSuccess != nil {
				t.Errorf("replay: partial success %v, want none (a duplicate or a non-GenAI span is no rejection)", answer.PartialSuccess)
			}
			// The SDK exporting the same ended spans again.
			if err := exp.ExportSpans(ctx, spans); err != nil {
				t.Fatalf("re-export: %v", err)
			}
			if s, err := f.Store.Session(ctx, session); err != nil || s.Length != 3 {
				t.Fatalf("after the replays: %+v, %v; want 3 entries", s, err)
			}
		})
	}
}

// otlpSpan is a GenAI span of trace tr (16 bytes) with span id sp.
func otlpSpan(tr, sp byte, op string, end uint64) *tracepb.Span {
	return &tracepb.Span{
		TraceId: bytes.Repeat([]byte{tr}, 16), SpanId: bytes.Repeat([]byte{sp}, 8),
		Name: op, StartTimeUnixNano: end - 1000, EndTimeUnixNano: end,
		Attributes: []*commonpb.KeyValue{strAttr("gen_ai.operation.name", op)},
	}
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func otlpBody(t *testing.T, spans ...*tracepb.Span) []byte {
	t.Helper()
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOTLPBadInput: every request refused for its content is a 4xx
// naming what is wrong, and writes nothing, not even its good spans; a
// replayed request is a 200 counting duplicates.
func TestOTLPBadInput(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store, MaxOTLPBodyBytes: 1 << 20}}))
	defer srv.Close()

	good := otlpSpan(1, 1, "execute_tool", 1_764_583_200_000_000_000)
	noTrace := otlpSpan(2, 2, "execute_tool", 1_764_583_200_000_000_000)
	noTrace.TraceId = nil
	shortSpan := otlpSpan(2, 2, "execute_tool", 1_764_583_200_000_000_000)
	shortSpan.SpanId = []byte{1, 2, 3}
	noEnd := otlpSpan(2, 3, "execute_tool", 1_764_583_200_000_000_000)
	noEnd.EndTimeUnixNano = 0
	many := make([]*tracepb.Span, ingest.MaxOTLPItems+1)
	for i := range many {
		many[i] = otlpSpan(3, 3, "chat", uint64(1_764_583_200_000_000_000+i))
		many[i].SpanId = []byte{0, 0, 0, 0, 0, 0, byte(i >> 8), byte(i) | 1}
	}
	big := otlpSpan(4, 4, "chat", 1_764_583_200_000_000_000)
	big.Attributes = append(big.Attributes, strAttr("gen_ai.output.messages", strings.Repeat("x", 1<<20)))

	for _, c := range []struct {
		name, contentType string
		body              []byte
		code              int
		want              string
	}{
		{"malformed protobuf", "application/x-protobuf", []byte{0x0a, 0xff, 0x01}, 400, "not an OTLP protobuf message"},
		{"malformed JSON", "application/json", []byte(`{"resourceSpans":[`), 400, "not strict JSON"},
		{"JSON with a member twice", "application/json", []byte(`{"resourceSpans":[],"resourceSpans":[]}`), 400, "not strict JSON"},
		{"JSON id not hex", "application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"0102030405060708"}]}]}]}`), 400, `resourceSpans[0].scopeSpans[0].spans[0].traceId: "zz" is not hex`},
		{"span without trace id", "application/x-protobuf", otlpBody(t, good, noTrace), 400, "resourceSpans[0].scopeSpans[0].spans[1] (name \"execute_tool\"): trace_id is empty"},
		{"span id of 3 bytes", "application/x-protobuf", otlpBody(t, good, shortSpan), 400, "span_id is 3 bytes, not 8"},
		{"span without end time", "application/x-protobuf", otlpBody(t, good, noEnd), 400, "end_time_unix_nano is 0"},
		{"the same span twice", "application/x-protobuf", otlpBody(t, good, good), 400, "is also resourceSpans[0].scopeSpans[0].spans[0]"},
		{"too many spans", "application/x-protobuf", otlpBody(t, many...), 413, "holds 10001 spans, more than 10000"},
		{"body too large", "application/x-protobuf", otlpBody(t, good, big), 413, "larger than 1048576 bytes"},
		{"wrong content type", "text/plain", otlpBody(t, good), 415, "application/x-protobuf or application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, hdr, body := send(t, srv.URL+"/v1/traces", c.contentType, c.body)
			// A google.rpc.Status in the request's encoding (JSON when
			// the request's is not OTLP's).
			var st status.Status
			unmarshal := proto.Unmarshal
			if hdr.Get("Content-Type") == "application/json" {
				unmarshal = protojson.Unmarshal
			}
			if err := unmarshal(body, &st); err != nil || hdr.Get("Content-Type") != map[bool]string{true: "application/x-protobuf", false: "application/json"}[c.contentType == "application/x-protobuf"] {
				t.Fatalf("the answer is not a google.rpc.Status in the request's encoding: %v %s %q", err, hdr.Get("Content-Type"), body)
			}
			msg := st.GetMessage()
			if code != c.code || !strings.Contains(msg, c.want) {
				t.Fatalf("%d %q, want %d naming %q", code, msg, c.code, c.want)
			}
			if hdr.Get("Acsledger-Ingest") != "" {
				t.Errorf("a refused request says %s", hdr.Get("Acsledger-Ingest"))
			}
		})
	}
	// Nothing of any refused request was written, not even its good span.
	for _, tr := range []byte{1, 2, 3, 4} {
		s := "otel-genai:" + hex.EncodeToString(bytes.Repeat([]byte{tr}, 16))
		if es, err := f.Store.Entries(ctx, s, 0, 1); err == nil && len(es) != 0 {
			t.Errorf("session %s was written by a refused request", s)
		}
	}
	// A replayed request: accepted once, then counted as duplicates.
	body := otlpBody(t, good, otlpSpan(1, 2, "invoke_agent", 1_764_583_200_000_000_001))
	for i, want := range []string{"accepted=2 duplicate=0 quarantined=0 skipped=0", "accepted=0 duplicate=2 quarantined=0 skipped=0"} {
		code, hdr, b := send(t, srv.URL+"/v1/traces", "application/x-protobuf", body)
		if code != 200 || hdr.Get("Acsledger-Ingest") != want {
			t.Fatalf("send %d: %d %s %q, want %s", i+1, code, hdr.Get("Acsledger-Ingest"), b, want)
		}
	}
	// The same span id with other content is no retry: quarantined, and
	// the answer counts it rejected.
	changed := otlpSpan(1, 1, "execute_tool", 1_764_583_200_000_000_000)
	changed.Name = "execute_tool other"
	code, hdr, b := send(t, srv.URL+"/v1/traces", "application/x-protobuf", otlpBody(t, changed))
	var answer coltracepb.ExportTraceServiceResponse
	proto.Unmarshal(b, &answer)
	if code != 200 || hdr.Get("Acsledger-Ingest") != "accepted=0 duplicate=0 quarantined=1 skipped=0" ||
		answer.PartialSuccess.GetRejectedSpans() != 1 || !strings.Contains(answer.PartialSuccess.GetErrorMessage(), "key_conflict") {
		t.Fatalf("changed span: %d %s %v", code, hdr.Get("Acsledger-Ingest"), &answer)
	}
	if s, err := f.Store.Session(ctx, "otel-genai:"+hex.EncodeToString(bytes.Repeat([]byte{1}, 16))); err != nil || s.Length != 2 {
		t.Fatalf("session of trace 01..: %+v, %v; want 2 entries", s, err)
	}
	// No credential: 401, nothing read.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", resp.StatusCode)
	}
}

// TestOTLPJSONExample posts docs/ingest.md's worked example, OTLP/JSON
// with hex ids, and checks the entry the document shows.
func TestOTLPJSONExample(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store}}))
	defer srv.Close()
	body, err := os.ReadFile("testdata/otlp-genai.json")
	if err != nil {
		t.Fatal(err)
	}
	code, hdr, b := send(t, srv.URL+"/v1/traces", "application/json", body)
	if code != 200 || hdr.Get("Acsledger-Ingest") != "accepted=2 duplicate=0 quarantined=0 skipped=0" || string(b) != "{}" {
		t.Fatalf("%d %s %s", code, hdr.Get("Acsledger-Ingest"), b)
	}
	es, err := f.Store.Entries(ctx, "otel-genai:5b8efff798038103d269b633813fc60c", 0, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	want, err := os.ReadFile("testdata/otlp-genai.entry.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(es[0].Content); got != strings.TrimSpace(string(want)) {
		t.Errorf("the first entry:\n%s\nwant (testdata/otlp-genai.entry.json):\n%s", got, want)
	}
}

func send(t *testing.T, url, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	resp, err := authed.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestOTLPLogs: GenAI log records go to their trace's session in time
// order; one carrying the signing processor's audit.integrity.value is
// flagged signed_unchecked; a record without a trace id, or of no GenAI
// event, is skipped; a replay is counted as duplicates.
func TestOTLPLogs(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store}}))
	defer srv.Close()
	trace := bytes.Repeat([]byte{9}, 16)
	rec := func(name string, at uint64, attrs ...*commonpb.KeyValue) *logspb.LogRecord {
		return &logspb.LogRecord{TraceId: trace, SpanId: bytes.Repeat([]byte{8}, 8), EventName: name, TimeUnixNano: at, Attributes: attrs,
			Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "Alice Example asked for Oslo"}}}
	}
	noTrace := rec("gen_ai.client.inference.operation.details", 5)
	noTrace.TraceId = nil
	body, err := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{
		rec("gen_ai.client.inference.operation.details", 1_764_583_200_000_000_300, strAttr("gen_ai.operation.name", "chat"), strAttr("audit.integrity.value", "c2lnbmF0dXJl")),
		rec("gen_ai.evaluation.result", 1_764_583_200_000_000_100),
		rec("app.debug", 1_764_583_200_000_000_200),
		noTrace,
	}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"accepted=2 duplicate=0 quarantined=0 skipped=2", "accepted=0 duplicate=2 quarantined=0 skipped=2"} {
		code, hdr, b := send(t, srv.URL+"/v1/logs", "application/x-protobuf", body)
		var answer collogspb.ExportLogsServiceResponse
		if code != 200 || hdr.Get("Acsledger-Ingest") != want || proto.Unmarshal(b, &answer) != nil || answer.PartialSuccess != nil {
			t.Fatalf("send %d: %d %s %q, want %s", i+1, code, hdr.Get("Acsledger-Ingest"), b, want)
		}
	}
	es, err := f.Store.Entries(ctx, "otel-genai:"+hex.EncodeToString(trace), 0, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	for i, want := range []string{`"step_type":"ingest/otel-genai/event/gen_ai.evaluation.result"`, `"step_type":"ingest/otel-genai/event/gen_ai.client.inference.operation.details"`} {
		if !bytes.Contains(es[i].Content, []byte(want)) || bytes.Contains(es[i].Content, []byte("Alice")) {
			t.Errorf("entry %d: %s, want %s and no body", i, es[i].Content, want)
		}
	}
	if !bytes.Contains(es[1].Content, []byte(`"integrity":"signed_unchecked"`)) || !bytes.Contains(es[0].Content, []byte(`"integrity":"unsigned"`)) {
		t.Errorf("integrity: %s / %s", es[0].Content, es[1].Content)
	}
	flagged, err := f.Store.Flagged(ctx, ingest.FlagOTelSignedUnchecked, ledger.IngestFilter{})
	if err != nil || len(flagged) != 1 || flagged[0].Position != 1 {
		t.Fatalf("flagged: %+v, %v", flagged, err)
	}
}
