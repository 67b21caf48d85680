package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// OTelGenAI is the format of OpenTelemetry GenAI agent and tool spans and
// GenAI log records, taken in over OTLP/HTTP (POST /v1/traces, /v1/logs;
// docs/ingest.md). It is not a file format of `acsledger ingest`.
const OTelGenAI Format = "otel-genai"

// MaxOTLPItems caps the spans, or log records, of one OTLP request. The
// Go SDK's batch processor exports 512 at most, the Collector's batch
// processor 8,192 by default; a larger request is refused whole (413) so
// that one request is one transaction of bounded size.
const MaxOTLPItems = 10_000

// FlagOTelSignedUnchecked marks a log record carrying the Collector
// signing processor's audit.integrity.value: it was signed, and the
// ledger did not check the signature (docs/ingest.md says why).
const FlagOTelSignedUnchecked = "otel_signed_unchecked"

// The attributes the mapping reads (OpenTelemetry semantic conventions
// for generative AI, status "development"; docs/ingest.md lists them).
const (
	attrOperation    = "gen_ai.operation.name"
	attrAgentID      = "gen_ai.agent.id"
	attrAgentName    = "gen_ai.agent.name"
	attrToolName     = "gen_ai.tool.name"
	attrToolCallID   = "gen_ai.tool.call.id"
	attrToolType     = "gen_ai.tool.type"
	attrConversation = "gen_ai.conversation.id"
	attrProvider     = "gen_ai.provider.name"
	attrRequestModel = "gen_ai.request.model"
	attrErrorType    = "error.type"
	attrServiceName  = "service.name"
	// attrIntegrity is where the Collector's signing processor puts a log
	// record's signature (base64, over RFC 8785 JSON of the record).
	attrIntegrity = "audit.integrity.value"
)

// ErrOTLPBadRequest marks an OTLP request refused whole: it could not be
// decoded, or one of its spans or log records breaks the protocol (a
// missing trace or span id). Nothing of it is written.
var ErrOTLPBadRequest = errors.New("bad OTLP request")

// ErrOTLPTooLarge marks an OTLP request of more than MaxOTLPItems spans
// or log records. Nothing of it is written.
var ErrOTLPTooLarge = errors.New("OTLP request too large")

// OTLPBatch is an OTLP request mapped: the records to ingest, in the
// order the ledger appends them (span end order, or log record time),
// and what was left out.
type OTLPBatch struct {
	Records []ledger.IngestRecord
	// Skipped counts the spans or log records that are not GenAI ones
	// (no gen_ai.operation.name; a log record with no gen_ai.* event
	// name or attribute, or without a trace id), which the ledger does
	// not keep; Why says why for the first of them. They are not
	// rejections: the sender did nothing wrong.
	Skipped int
	Why     string
}

// DecodeOTLPTraces decodes an OTLP/HTTP traces request body, protobuf
// (binary) or JSON as the OTLP specification maps it: trace and span ids
// in hex, not the base64 of protobuf's own JSON mapping, and unknown
// members ignored.
func DecodeOTLPTraces(body []byte, json bool) (*coltracepb.ExportTraceServiceRequest, error) {
	req := new(coltracepb.ExportTraceServiceRequest)
	return req, decodeOTLP(body, json, req)
}

// DecodeOTLPLogs is DecodeOTLPTraces for a logs request.
func DecodeOTLPLogs(body []byte, json bool) (*collogspb.ExportLogsServiceRequest, error) {
	req := new(collogspb.ExportLogsServiceRequest)
	return req, decodeOTLP(body, json, req)
}

func decodeOTLP(body []byte, isJSON bool, m proto.Message) error {
	if !isJSON {
		if err := proto.Unmarshal(body, m); err != nil {
			return fmt.Errorf("%w: the body is not an OTLP protobuf message: %v", ErrOTLPBadRequest, err)
		}
		return nil
	}
	b, err := hexIDsToBase64(body)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrOTLPBadRequest, err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: the body is not OTLP JSON: %v", ErrOTLPBadRequest, err)
	}
	return nil
}

// otlpIDMembers are the members OTLP/JSON writes as hex where protobuf's
// JSON mapping has base64 (OTLP specification, "JSON Protobuf Encoding").
var otlpIDMembers = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

// hexIDsToBase64 rewrites the id members of an OTLP/JSON body from hex
// to base64, so that protojson reads them. Attribute keys are values of
// "key" members, never member names, so no attribute is touched.
func hexIDsToBase64(body []byte) ([]byte, error) {
	// Strict first: the map below would keep the last of two members of
	// one name, and invalid UTF-8 would be replaced, both silently.
	if _, err := acs.Canonicalize(body); err != nil {
		return nil, fmt.Errorf("the body is not strict JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("the body is not JSON: data after the top-level value")
	}
	if err := rewriteIDs(v, ""); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func rewriteIDs(v any, at string) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && otlpIDMembers[k] {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s: %q is not hex", joinPath(at, k), s)
				}
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := rewriteIDs(e, joinPath(at, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := rewriteIDs(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// otelEntry is the ContextEntry of one span or log record. It holds the
// ids, names, operation, times and status: what the run did, not what it
// said. Attributes that may carry personal data (messages, tool
// arguments and results, user ids, the span's status message, a log
// record's body) stay in the source record, sealed and erasable.
type otelEntry struct {
	EntryID   string     `json:"entry_id"`
	StepID    string     `json:"step_id"`
	StepType  string     `json:"step_type"`
	Timestamp string     `json:"timestamp"`
	Span      *otelSpan  `json:"span,omitempty"`
	Event     *otelEvent `json:"event,omitempty"`
	GenAI     otelGenAI  `json:"gen_ai"`
	Integrity string     `json:"integrity"`
	Service   string     `json:"service_name,omitempty"`
	Scope     *otelScope `json:"scope,omitempty"`
	Flags     []string   `json:"flags,omitempty"`
	sourceRef
}

type otelSpan struct {
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	StartTime    string `json:"start_time"`
	EndTime      string `json:"end_time"`
	Status       string `json:"status"`
}

type otelEvent struct {
	TraceID        string `json:"trace_id"`
	SpanID         string `json:"span_id,omitempty"`
	EventName      string `json:"event_name,omitempty"`
	SeverityNumber int32  `json:"severity_number,omitempty"`
	Time           string `json:"time"`
}

type otelScope struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// otelGenAI holds the GenAI attributes that name things: the operation,
// the agent, the tool, the conversation, the provider and model.
type otelGenAI struct {
	Operation    string `json:"operation_name,omitempty"`
	AgentID      string `json:"agent_id,omitempty"`
	AgentName    string `json:"agent_name,omitempty"`
	ToolName     string `json:"tool_name,omitempty"`
	ToolCallID   string `json:"tool_call_id,omitempty"`
	ToolType     string `json:"tool_type,omitempty"`
	Conversation string `json:"conversation_id,omitempty"`
	Provider     string `json:"provider_name,omitempty"`
	RequestModel string `json:"request_model,omitempty"`
	ErrorType    string `json:"error_type,omitempty"`
}

// OTelSession is the session of a trace's spans and log records: one
// session per trace (docs/ingest.md says why not per conversation).
func OTelSession(traceID []byte) string { return "otel-genai:" + hex.EncodeToString(traceID) }

// MapOTLPTraces maps the GenAI spans of a traces request to ingest
// records, in span end order. A span without a valid trace id, span id
// or end time refuses the whole request (ErrOTLPBadRequest, naming the
// span); so does more than MaxOTLPItems spans (ErrOTLPTooLarge).
func MapOTLPTraces(req *coltracepb.ExportTraceServiceRequest, file string) (OTLPBatch, error) {
	var out OTLPBatch
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	if n > MaxOTLPItems {
		return out, fmt.Errorf("%w: the request holds %d spans, more than %d", ErrOTLPTooLarge, n, MaxOTLPItems)
	}
	type pending struct {
		end uint64
		rec ledger.IngestRecord
	}
	ps := make([]pending, 0, n)
	seen := make(map[string]string, n)
	var record int64
	for i, rs := range req.GetResourceSpans() {
		service := stringAttr(rs.GetResource().GetAttributes(), attrServiceName)
		for j, ss := range rs.GetScopeSpans() {
			for k, sp := range ss.GetSpans() {
				record++
				at := fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d]", i, j, k)
				if err := checkIDs(sp.GetTraceId(), sp.GetSpanId(), sp.GetParentSpanId(), true); err != nil {
					return out, fmt.Errorf("%w: %s (name %q): %v", ErrOTLPBadRequest, at, sp.GetName(), err)
				}
				if sp.GetEndTimeUnixNano() == 0 {
					return out, fmt.Errorf("%w: %s (name %q): end_time_unix_nano is 0", ErrOTLPBadRequest, at, sp.GetName())
				}
				trace, span := hex.EncodeToString(sp.GetTraceId()), hex.EncodeToString(sp.GetSpanId())
				key := naturalKey(trace, span)
				if prev, dup := seen[key]; dup {
					return out, fmt.Errorf("%w: %s: trace %s span %s is also %s", ErrOTLPBadRequest, at, trace, span, prev)
				}
				seen[key] = at
				op := stringAttr(sp.GetAttributes(), attrOperation)
				if op == "" {
					if out.Skipped == 0 {
						out.Why = fmt.Sprintf("%s (name %q) has no %s: not a GenAI span", at, sp.GetName(), attrOperation)
					}
					out.Skipped++
					continue
				}
				src, err := proto.MarshalOptions{Deterministic: true}.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
					Resource: rs.GetResource(), SchemaUrl: rs.GetSchemaUrl(),
					ScopeSpans: []*tracepb.ScopeSpans{{Scope: ss.GetScope(), SchemaUrl: ss.GetSchemaUrl(), Spans: []*tracepb.Span{sp}}},
				}}})
				if err != nil {
					return out, fmt.Errorf("%w: %s: %v", ErrOTLPBadRequest, at, err)
				}
				raw := Raw{File: file, Record: record, Bytes: src}
				e := otelEntry{
					EntryID: "otel:" + trace + ":" + span, StepID: "otel:" + trace + ":" + span,
					StepType:  otelStepType("span", op),
					Timestamp: unixNano(sp.GetEndTimeUnixNano()),
					Span: &otelSpan{
						TraceID: trace, SpanID: span, ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
						Name: sp.GetName(), Kind: sp.GetKind().String(),
						StartTime: unixNano(sp.GetStartTimeUnixNano()), EndTime: unixNano(sp.GetEndTimeUnixNano()),
						Status: sp.GetStatus().GetCode().String(),
					},
					GenAI: genAIOf(sp.GetAttributes(), op),
					// The signing processor signs log records only.
					Integrity: "unsigned",
					Service:   service, Scope: scopeOf(ss.GetScope()),
					sourceRef: newSourceRef(OTelGenAI, key, raw),
				}
				ps = append(ps, pending{sp.GetEndTimeUnixNano(), otelRecord(raw, key, trace, e)})
			}
		}
	}
	// Span end order: a parent ends after its children, so an agent's
	// invoke_agent span follows the tool calls it made.
	slices.SortStableFunc(ps, func(a, b pending) int {
		switch {
		case a.end < b.end:
			return -1
		case a.end > b.end:
			return 1
		}
		return 0
	})
	out.Records = make([]ledger.IngestRecord, len(ps))
	for i, p := range ps {
		out.Records[i] = p.rec
	}
	return out, nil
}

// MapOTLPLogs maps the GenAI log records of a logs request (an event
// name or an attribute under gen_ai.) to ingest records, in time order,
// into the session of their trace. A log record's natural key is the
// SHA-256 of its source record: log records have no id of their own.
func MapOTLPLogs(req *collogspb.ExportLogsServiceRequest, file string) (OTLPBatch, error) {
	var out OTLPBatch
	n := 0
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			n += len(sl.GetLogRecords())
		}
	}
	if n > MaxOTLPItems {
		return out, fmt.Errorf("%w: the request holds %d log records, more than %d", ErrOTLPTooLarge, n, MaxOTLPItems)
	}
	type pending struct {
		at  uint64
		rec ledger.IngestRecord
	}
	ps := make([]pending, 0, n)
	skip := func(at, why string) {
		if out.Skipped == 0 {
			out.Why = at + ": " + why
		}
		out.Skipped++
	}
	var record int64
	for i, rl := range req.GetResourceLogs() {
		service := stringAttr(rl.GetResource().GetAttributes(), attrServiceName)
		for j, sl := range rl.GetScopeLogs() {
			for k, lr := range sl.GetLogRecords() {
				record++
				at := fmt.Sprintf("resourceLogs[%d].scopeLogs[%d].logRecords[%d]", i, j, k)
				if !isGenAILog(lr) {
					skip(at, "no gen_ai.* event name or attribute: not a GenAI log record")
					continue
				}
				if len(lr.GetTraceId()) == 0 {
					skip(at, "no trace_id: no session to put it in")
					continue
				}
				if err := checkIDs(lr.GetTraceId(), lr.GetSpanId(), nil, false); err != nil {
					return out, fmt.Errorf("%w: %s: %v", ErrOTLPBadRequest, at, err)
				}
				when := lr.GetTimeUnixNano()
				if when == 0 {
					when = lr.GetObservedTimeUnixNano()
				}
				if when == 0 {
					return out, fmt.Errorf("%w: %s: neither time_unix_nano nor observed_time_unix_nano is set", ErrOTLPBadRequest, at)
				}
				src, err := proto.MarshalOptions{Deterministic: true}.Marshal(&logspb.LogsData{ResourceLogs: []*logspb.ResourceLogs{{
					Resource: rl.GetResource(), SchemaUrl: rl.GetSchemaUrl(),
					ScopeLogs: []*logspb.ScopeLogs{{Scope: sl.GetScope(), SchemaUrl: sl.GetSchemaUrl(), LogRecords: []*logspb.LogRecord{lr}}},
				}}})
				if err != nil {
					return out, fmt.Errorf("%w: %s: %v", ErrOTLPBadRequest, at, err)
				}
				raw := Raw{File: file, Record: record, Bytes: src}
				sum := sha256.Sum256(src)
				key := "log:" + hex.EncodeToString(sum[:])
				trace := hex.EncodeToString(lr.GetTraceId())
				op := stringAttr(lr.GetAttributes(), attrOperation)
				e := otelEntry{
					EntryID: "otel:" + trace + ":" + key, StepID: "otel:" + trace + ":" + key,
					StepType:  otelStepType("event", lr.GetEventName()),
					Timestamp: unixNano(when),
					Event: &otelEvent{
						TraceID: trace, SpanID: hex.EncodeToString(lr.GetSpanId()), EventName: lr.GetEventName(),
						SeverityNumber: int32(lr.GetSeverityNumber()), Time: unixNano(when),
					},
					GenAI:     genAIOf(lr.GetAttributes(), op),
					Integrity: "unsigned",
					Service:   service, Scope: scopeOf(sl.GetScope()),
					sourceRef: newSourceRef(OTelGenAI, key, raw),
				}
				if stringAttr(lr.GetAttributes(), attrIntegrity) != "" {
					e.Integrity = "signed_unchecked"
					e.Flags = []string{FlagOTelSignedUnchecked}
				}
				ps = append(ps, pending{when, otelRecord(raw, key, trace, e)})
			}
		}
	}
	slices.SortStableFunc(ps, func(a, b pending) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	out.Records = make([]ledger.IngestRecord, len(ps))
	for i, p := range ps {
		out.Records[i] = p.rec
	}
	return out, nil
}

func otelRecord(raw Raw, key, trace string, e otelEntry) ledger.IngestRecord {
	entry, err := json.Marshal(e)
	if err != nil {
		return quarantine(OTelGenAI, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	traceID, _ := hex.DecodeString(trace)
	// Parsed here, outside the store's transaction, as mapAll does.
	parsed, _ := acs.ParseEntry(entry)
	return ledger.IngestRecord{
		Source: string(OTelGenAI), Key: key, Digest: sha256.Sum256(raw.Bytes),
		File: raw.File, Record: raw.Record, Raw: raw.Bytes, KeepSource: true, Flags: e.Flags,
		Entry: ledger.Record{SessionID: OTelSession(traceID), Entry: entry}, Parsed: parsed,
	}
}

// checkIDs checks the ids of a span (spanRequired) or log record: OTLP
// requires a 16-byte trace id and an 8-byte span id, neither all zeros.
func checkIDs(trace, span, parent []byte, spanRequired bool) error {
	switch {
	case len(trace) == 0:
		return errors.New("trace_id is empty")
	case len(trace) != 16:
		return fmt.Errorf("trace_id is %d bytes, not 16", len(trace))
	case allZero(trace):
		return errors.New("trace_id is all zeros")
	case len(span) == 0 && spanRequired:
		return errors.New("span_id is empty")
	case len(span) != 0 && len(span) != 8:
		return fmt.Errorf("span_id is %d bytes, not 8", len(span))
	case len(span) != 0 && allZero(span):
		return errors.New("span_id is all zeros")
	case len(parent) != 0 && len(parent) != 8:
		return fmt.Errorf("parent_span_id is %d bytes, not 8", len(parent))
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// otelStepType is "ingest/otel-genai/<kind>/<name>" when the name is a
// short identifier (invoke_agent, execute_tool, gen_ai.client.inference.
// operation.details), else "ingest/otel-genai/<kind>".
func otelStepType(kind, name string) string {
	st := "ingest/otel-genai/" + kind
	if name == "" || len(name) > 64 {
		return st
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return st
		}
	}
	return st + "/" + name
}

func isGenAILog(lr *logspb.LogRecord) bool {
	if strings.HasPrefix(lr.GetEventName(), "gen_ai.") {
		return true
	}
	for _, kv := range lr.GetAttributes() {
		if strings.HasPrefix(kv.GetKey(), "gen_ai.") {
			return true
		}
	}
	return false
}

func genAIOf(attrs []*commonpb.KeyValue, op string) otelGenAI {
	return otelGenAI{
		Operation:    op,
		AgentID:      stringAttr(attrs, attrAgentID),
		AgentName:    stringAttr(attrs, attrAgentName),
		ToolName:     stringAttr(attrs, attrToolName),
		ToolCallID:   stringAttr(attrs, attrToolCallID),
		ToolType:     stringAttr(attrs, attrToolType),
		Conversation: stringAttr(attrs, attrConversation),
		Provider:     stringAttr(attrs, attrProvider),
		RequestModel: stringAttr(attrs, attrRequestModel),
		ErrorType:    stringAttr(attrs, attrErrorType),
	}
}

func scopeOf(s *commonpb.InstrumentationScope) *otelScope {
	if s.GetName() == "" {
		return nil
	}
	return &otelScope{Name: s.GetName(), Version: s.GetVersion()}
}

// stringAttr returns the string value of the attribute key, or "" (an
// attribute of another type is not read).
func stringAttr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// unixNano formats a Unix time in nanoseconds as RFC 3339 in UTC.
func unixNano(ns uint64) string {
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}
