package ingestapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/ledger"
)

// DefaultMaxOTLPBodyBytes caps one OTLP request body after
// decompression; the route refuses a larger one whole with 413.
const DefaultMaxOTLPBodyBytes = 16 << 20

// SummaryHeader carries what became of an OTLP request's records
// ("accepted=3 duplicate=0 quarantined=0 skipped=1"): the OTLP answer
// itself only counts rejections.
const SummaryHeader = "Acsledger-Ingest"

// MountOTLP mounts POST /v1/traces and POST /v1/logs, OTLP/HTTP's paths,
// on r (the root router): an OTLP exporter given the server's URL as its
// endpoint appends them itself.
func (ir *Routes) MountOTLP(r chi.Router) {
	r.Post("/v1/traces", ir.supported(ir.limited(ir.otlpTraces)))
	r.Post("/v1/logs", ir.supported(ir.limited(ir.otlpLogs)))
}

// otlpTraces takes one OTLP/HTTP traces export (docs/ingest.md).
func (ir *Routes) otlpTraces(w http.ResponseWriter, r *http.Request) {
	ir.otlp(w, r, "otlp traces", func(body []byte, isJSON bool) (ingest.OTLPBatch, error) {
		req, err := ingest.DecodeOTLPTraces(body, isJSON)
		if err != nil {
			return ingest.OTLPBatch{}, err
		}
		return ingest.MapOTLPTraces(req, "otlp traces")
	}, func(rejected int64, msg string) proto.Message {
		resp := &coltracepb.ExportTraceServiceResponse{}
		if rejected > 0 || msg != "" {
			resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg}
		}
		return resp
	})
}

// otlpLogs takes one OTLP/HTTP logs export (docs/ingest.md).
func (ir *Routes) otlpLogs(w http.ResponseWriter, r *http.Request) {
	ir.otlp(w, r, "otlp logs", func(body []byte, isJSON bool) (ingest.OTLPBatch, error) {
		req, err := ingest.DecodeOTLPLogs(body, isJSON)
		if err != nil {
			return ingest.OTLPBatch{}, err
		}
		return ingest.MapOTLPLogs(req, "otlp logs")
	}, func(rejected int64, msg string) proto.Message {
		resp := &collogspb.ExportLogsServiceResponse{}
		if rejected > 0 || msg != "" {
			resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg}
		}
		return resp
	})
}

// otlp reads, maps and ingests one OTLP request: a request refused for
// its content writes nothing; the rest is written as ingest.Write writes
// a batch, and a retry after a store failure, or a replayed request, finds
// what was committed as duplicates. The answer follows
// OTLP/HTTP: 200 with the export response (partial_success counting the
// records not kept), or 4xx with a google.rpc.Status naming what was
// wrong, in the request's encoding.
func (ir *Routes) otlp(w http.ResponseWriter, r *http.Request, file string,
	decode func(body []byte, isJSON bool) (ingest.OTLPBatch, error),
	answer func(rejected int64, msg string) proto.Message) {
	isJSON, err := otlpContentType(r.Header.Get("Content-Type"))
	if err != nil {
		otlpStatus(w, true, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	in, done, err := ir.body(w, r)
	if err != nil {
		otlpStatus(w, isJSON, http.StatusBadRequest, err.Error())
		return
	}
	defer done()
	limit := ir.opts.MaxOTLPBodyBytes
	if limit <= 0 {
		limit = DefaultMaxOTLPBodyBytes
	}
	body, err := io.ReadAll(io.LimitReader(in, limit+1))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr) || err == nil && int64(len(body)) > limit:
		otlpStatus(w, isJSON, http.StatusRequestEntityTooLarge, fmt.Sprintf("the %s request body is larger than %d bytes", file, min(limit, ir.opts.MaxBodyBytes)))
		return
	case err != nil:
		otlpStatus(w, isJSON, http.StatusBadRequest, fmt.Sprintf("couldn't read the %s request body: %v", file, err))
		return
	}
	batch, err := decode(body, isJSON)
	switch {
	case errors.Is(err, ingest.ErrOTLPTooLarge):
		otlpStatus(w, isJSON, http.StatusRequestEntityTooLarge, err.Error())
		return
	case err != nil:
		otlpStatus(w, isJSON, http.StatusBadRequest, err.Error())
		return
	}
	// Spans that are not GenAI ones are left out and counted in the
	// summary header only: OTLP's partial_success is for rejections,
	// which an exporter reports as errors, and an agent that exports
	// every span to the ledger did nothing wrong.
	var sum ingest.Summary
	var rejected int64
	msg := ""
	if len(batch.Records) > 0 {
		res, err := ingest.Write(r.Context(), ir.store, batch.Records)
		if err != nil {
			ir.fail(w, r, err)
			return
		}
		for i, x := range res {
			switch x.Status {
			case ledger.IngestAccepted:
				sum.Accepted++
			case ledger.IngestDuplicate:
				sum.Duplicate++
			default:
				sum.Quarantined++
				rejected++
				if sum.Quarantined == 1 {
					if msg != "" {
						msg += "; "
					}
					msg += fmt.Sprintf("quarantined %s (%s): %s", batch.Records[i].Key, x.Reason, x.Detail)
				}
			}
		}
	}
	w.Header().Set(SummaryHeader, fmt.Sprintf("accepted=%d duplicate=%d quarantined=%d skipped=%d", sum.Accepted, sum.Duplicate, sum.Quarantined, batch.Skipped))
	otlpWrite(w, isJSON, http.StatusOK, answer(rejected, msg))
}

// otlpContentType tells OTLP/HTTP's two encodings apart.
func otlpContentType(ct string) (isJSON bool, err error) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil && ct != "" {
		return false, fmt.Errorf("Content-Type %q: %v", ct, err)
	}
	switch strings.ToLower(mt) {
	case "application/x-protobuf":
		return false, nil
	case "application/json":
		return true, nil
	}
	return false, fmt.Errorf("Content-Type %q: OTLP/HTTP takes application/x-protobuf or application/json", ct)
}

// otlpStatus answers code with a google.rpc.Status, as OTLP/HTTP says a
// failed request is answered.
func otlpStatus(w http.ResponseWriter, isJSON bool, code int, msg string) {
	c := codes.InvalidArgument
	if code == http.StatusRequestEntityTooLarge {
		c = codes.ResourceExhausted
	}
	otlpWrite(w, isJSON, code, &status.Status{Code: int32(c), Message: msg})
}

func otlpWrite(w http.ResponseWriter, isJSON bool, code int, m proto.Message) {
	var b []byte
	if isJSON {
		b, _ = protojson.Marshal(m)
		w.Header().Set("Content-Type", "application/json")
	} else {
		b, _ = proto.Marshal(m)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(code)
	w.Write(b)
}
