package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/ingestapi"
)

// otlpBatchSizes are the spans of one OTLP request: the Go SDK's batch
// span processor exports 512 at most; the Collector's batch processor
// sends 8,192 by default.
var otlpBatchSizes = []int{512, 8192}

func kv(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// otlpBenchBodies returns n GenAI spans as OTLP protobuf requests of
// per spans: agent runs of one invoke_agent span and seven
// execute_tool spans, each run its own trace (its own session), with the
// message and argument attributes a real instrumentation records
// (about 700 bytes a span).
func otlpBenchBodies(b *testing.B, run, n, per int) [][]byte {
	var bodies [][]byte
	for off := 0; off < n; off += per {
		var spans []*tracepb.Span
		for i := off; i < min(n, off+per); i++ {
			trace := []byte(fmt.Sprintf("r%04dt%010d", run, i/8))
			span := []byte(fmt.Sprintf("s%07d", i))
			end := uint64(1_764_583_200_000_000_000 + int64(i)*1000)
			sp := &tracepb.Span{TraceId: trace, SpanId: span, StartTimeUnixNano: end - 500, EndTimeUnixNano: end, Kind: tracepb.Span_SPAN_KIND_INTERNAL}
			if i%8 == 7 {
				sp.Name = "invoke_agent booking"
				sp.Attributes = []*commonpb.KeyValue{kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.id", "agt-booking-7"),
					kv("gen_ai.agent.name", "booking"), kv("gen_ai.conversation.id", fmt.Sprintf("conv-%d", i/8)),
					kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Book a flight to Oslo for next Tuesday"}]}]`)}
			} else {
				sp.Name = "execute_tool search_flights"
				sp.ParentSpanId = []byte(fmt.Sprintf("s%07d", i|7))
				sp.Attributes = []*commonpb.KeyValue{kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "search_flights"),
					kv("gen_ai.tool.call.id", fmt.Sprintf("call_%d", i)), kv("gen_ai.tool.type", "function"),
					kv("gen_ai.tool.call.arguments", `{"from":"BER","to":"OSL","date":"2026-12-08"}`),
					kv("gen_ai.tool.call.result", strings.Repeat(`{"flight":"SK1234","price":129}`, 6))}
			}
			spans = append(spans, sp)
		}
		body, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", "travel-agent")}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "example.com/travel-agent", Version: "0.3.1"}, Spans: spans}},
		}}})
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	return bodies
}

// exportOTLP POSTs each body of work to /v1/traces as the OTLP/HTTP
// exporter does, retrying on 429, and returns the first failure.
func exportOTLP(base string, work <-chan []byte) error {
	for body := range work {
		for {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/traces", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Authorization", "Bearer "+benchToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Acsledger-Ingest"), "accepted=") ||
				strings.Contains(resp.Header.Get("Acsledger-Ingest"), "accepted=0 ") {
				return fmt.Errorf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Acsledger-Ingest"), msg)
			}
			break
		}
	}
	return nil
}

// BenchmarkOTLPSpans measures OTLP span ingest: GenAI spans exported
// over loopback HTTP to POST /v1/traces as the Go SDK exports them
// (protobuf, two requests in flight) in requests of 512 spans, as the Go
// SDK sends them, and of 8,192, as a Collector's batch processor does, each request
// decoded, mapped and written (ingest.Write) with its spans sealed,
// anchored in the Merkle log; beside it, in the same run and store, the
// bulk ingest of as many OPA decisions (ingest.Runner, batches of 2,000).
// Durability on.
func BenchmarkOTLPSpans(b *testing.B) {
	for _, kind := range []string{"postgres", "sqlite"} {
		for _, per := range otlpBatchSizes {
			b.Run(fmt.Sprintf("%s/spans-per-request=%d", kind, per), func(b *testing.B) { benchOTLPSpans(b, kind, per) })
		}
	}
}

func benchOTLPSpans(b *testing.B, kind string, per int) {
	var s ingest.Store
	var l *tlog.Log
	switch kind {
	case "postgres":
		_, ps, pl := benchPostgres(b)
		s, l = ps, pl
	case "sqlite":
		ss, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "ledger.db"), ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ss.Close() })
		s, l = ss, newBenchLog(b, ss.LogStorage())
	}
	st := s.(interface {
		web.Store
		ingestapi.Store
	})
	srv := httptest.NewServer(web.New(st, web.Options{Auth: web.AuthOptions{Bootstrap: benchToken, NoAccessLog: true}, Ingest: web.IngestOptions{Store: st}}))
	defer srv.Close()
	const n, clients = 20_480, 2
	var spanSecs, opaSecs float64
	var spanCPU, opaCPU time.Duration
	var spans, decisions int64
	for i := 0; i < b.N; i++ {
		bodies := otlpBenchBodies(b, i, n, per)
		start, cpu := time.Now(), cpuTime()
		stop := anchoring(b, l)
		sendAll(b, clients, bodies, func(work <-chan []byte) error { return exportOTLP(srv.URL, work) })
		stop()
		spanSecs += time.Since(start).Seconds()
		spanCPU += cpuTime() - cpu
		spans += n

		raws := benchRaws(fmt.Sprintf("otlp-opa%d", i), n)
		start, cpu = time.Now(), cpuTime()
		stop = anchoring(b, l)
		r := ingest.Runner{Store: s, Batch: 2000}
		if sum, err := r.Run(context.Background(), ingest.OPAMapper{}, seq(raws)); err != nil || sum.Accepted != n {
			b.Fatalf("%+v, %v", sum, err)
		}
		stop()
		opaSecs += time.Since(start).Seconds()
		opaCPU += cpuTime() - cpu
		decisions += n
	}
	b.ReportMetric(float64(spans)/spanSecs, "otlp-spans/s")
	b.ReportMetric(float64(decisions)/opaSecs, "opa-bulk-entries/s")
	b.ReportMetric((float64(spans)/spanSecs)/(float64(decisions)/opaSecs), "ratio")
	// CPU per record, this process and PostgreSQL together (the benchmark's
	// HTTP client included on the OTLP side): what the work costs
	// whatever else the machine runs.
	b.ReportMetric(float64(spanCPU.Microseconds())/float64(spans), "otlp-cpu-us/span")
	b.ReportMetric(float64(opaCPU.Microseconds())/float64(decisions), "opa-cpu-us/entry")
}
