// Package ingestapi serves the ingest routes of acsledger's HTTP API
// (docs/ingest.md): OPA decision-log uploads and A2H pushes taken in
// through package ingest, and the listings of the quarantine and of
// flagged ingested records.
package ingestapi

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Store is what the ingest routes read and write of the ledger: what the
// ingest runner and the A2H mapper need (ingest.Store) and the listings
// of quarantined and flagged records (ledger.IngestStore documents them).
type Store interface {
	ingest.Store
	Quarantined(ctx context.Context, f ledger.IngestFilter) ([]ledger.Quarantined, error)
	Flagged(ctx context.Context, flag string, f ledger.IngestFilter) ([]ledger.IngestResult, error)
}

var _ Store = ledger.IngestStore(nil)

// Options configure the ingest routes (docs/ingest.md). The zero value
// answers every route 501; with a Store it serves OPA uploads and the
// listings, and A2H pushes with A2HKeys.
type Options struct {
	// Store keeps the ingested records; nil for a store that keeps none.
	Store Store
	// OPASessionPath is where an OPA decision names its session (default
	// ingest.DefaultOPASessionPath).
	OPASessionPath string
	// OPASubjectPath maps a member of a decision's input or labels to the
	// entry's subject (ingest.OPAMapper.SubjectPath, checked by
	// ingest.CheckOPASubjectPath); "" maps none.
	OPASubjectPath string
	// A2HKeys verify pushed A2H Responses; A2HWindow is the replay window
	// (default ingest.DefaultA2HWindow). A2HCallbackURL is the URL the Hub
	// was given and signs (spec §9.2); "" rebuilds it from the request.
	A2HKeys        []ingest.A2HKey
	A2HWindow      time.Duration
	A2HCallbackURL string
	// MaxInFlight caps the ingest requests handled at once (default 2);
	// one more is refused with 429 and Retry-After, which OPA's
	// decision-log plugin honours by retrying later, so memory stays
	// bounded by MaxInFlight batches whatever the senders do.
	MaxInFlight int
	// MaxBodyBytes caps one request body after decompression (default
	// 256 MiB); Batch is the records per transaction (default
	// ingest.DefaultBatch).
	MaxBodyBytes int64
	Batch        int
	// MaxOTLPBodyBytes caps one OTLP request body after decompression
	// (default DefaultMaxOTLPBodyBytes).
	MaxOTLPBodyBytes int64
	// Now is the clock that stamps A2H pushes' received_at.
	Now func() time.Time
}

// Routes serves the ingest API over a store that keeps ingested
// records. Its write routes take records in (they need a writer's
// credential); its read routes list the quarantine and flagged records (an
// auditor's).
type Routes struct {
	store    Store
	opts     Options
	log      *slog.Logger
	inFlight chan struct{}
}

// New returns the ingest routes over opts.Store. Without one every route
// answers 501.
func New(opts Options, log *slog.Logger) *Routes {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 2
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 256 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Routes{store: opts.Store, opts: opts, log: log, inFlight: make(chan struct{}, opts.MaxInFlight)}
}

// MountWrite mounts POST /ingest/opa/logs and POST /ingest/a2h on r (the
// /api/v1 router).
func (ir *Routes) MountWrite(r chi.Router) {
	r.Post("/ingest/opa/logs", ir.supported(ir.limited(ir.opaLogs)))
	r.Post("/ingest/a2h", ir.supported(ir.limited(ir.a2hPush)))
}

// MountRead mounts GET /ingest/quarantine and GET /ingest/flagged on r.
func (ir *Routes) MountRead(r chi.Router) {
	r.Get("/ingest/quarantine", ir.supported(ir.quarantine))
	r.Get("/ingest/flagged", ir.supported(ir.flagged))
}

// Mount mounts every ingest route on r.
func (ir *Routes) Mount(r chi.Router) {
	ir.MountWrite(r)
	ir.MountRead(r)
}

// supported answers 501 over a store that keeps no ingested records.
func (ir *Routes) supported(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ir.store == nil {
			httpapi.WriteError(w, http.StatusNotImplemented, "this store does not support ingest")
			return
		}
		h(w, r)
	}
}

// limited refuses a request with 429 while MaxInFlight others are handled.
func (ir *Routes) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case ir.inFlight <- struct{}{}:
			defer func() { <-ir.inFlight }()
			h(w, r)
		default:
			httpapi.RefuseUnread(w, r)
			w.Header().Set("Retry-After", "1")
			httpapi.WriteError(w, http.StatusTooManyRequests, "the ledger is busy ingesting; retry after 1 s")
		}
	}
}

// body returns the request body, decompressed when Content-Encoding says
// gzip, capped at MaxBodyBytes.
func (ir *Routes) body(w http.ResponseWriter, r *http.Request) (io.Reader, func(), error) {
	var in io.Reader = r.Body
	closeFn := func() {}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(http.MaxBytesReader(w, r.Body, ir.opts.MaxBodyBytes))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: the body is not gzip: %v", httpapi.ErrBadRequest, err)
		}
		in, closeFn = zr, func() { zr.Close() }
	default:
		return nil, nil, fmt.Errorf("%w: unsupported Content-Encoding %q", httpapi.ErrBadRequest, enc)
	}
	return http.MaxBytesReader(w, io.NopCloser(in), ir.opts.MaxBodyBytes), closeFn, nil
}

// ingestSummary is the answer to an ingest request.
type ingestSummary struct {
	ingest.Summary
	Quarantined []quarantinedJSON `json:"quarantined_records,omitempty"`
}

// opaLogs takes one upload of OPA's decision-log plugin: a gzip JSON array
// of events. Records that fail a check are quarantined and the upload
// still succeeds, so OPA does not resend them; a store failure is a 500,
// which OPA retries, and a retry finds what was stored as duplicates.
func (ir *Routes) opaLogs(w http.ResponseWriter, r *http.Request) {
	in, done, err := ir.body(w, r)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	defer done()
	m := ingest.OPAMapper{SessionPath: ir.opts.OPASessionPath, SubjectPath: ir.opts.OPASubjectPath}
	ir.run(w, r, m, ingest.ArrayElements(in, "opa upload"))
}

// a2hPush takes one Response a Hub pushes (spec §8, §9.2), checked as of
// now against the callback URL.
func (ir *Routes) a2hPush(w http.ResponseWriter, r *http.Request) {
	if len(ir.opts.A2HKeys) == 0 {
		httpapi.WriteError(w, http.StatusNotImplemented, "no A2H keys are configured")
		return
	}
	in, done, err := ir.body(w, r)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	defer done()
	body, err := io.ReadAll(io.LimitReader(in, ingest.MaxRecordBytes+1))
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	cb := ir.opts.A2HCallbackURL
	if cb == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		cb = scheme + "://" + r.Host + r.URL.Path
	}
	line, err := ingest.DeliveryLine(ir.opts.Now(), cb, r.Header.Get(ingest.SignatureHeader), body)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	raw := ingest.Raw{File: "a2h push", Record: 1, Bytes: line}
	if len(body) > ingest.MaxRecordBytes {
		raw.Err = fmt.Errorf("the body is longer than %d bytes", ingest.MaxRecordBytes)
	}
	m := ingest.A2HMapper{
		Verifier: ingest.A2HVerifier{Keys: ir.opts.A2HKeys, Window: ir.opts.A2HWindow},
		Store:    ir.store,
	}
	rec := m.Map(r.Context(), raw)
	res, err := ir.store.Ingest(r.Context(), []ledger.IngestRecord{rec})
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	out := res[0]
	switch out.Status {
	case ledger.IngestQuarantined:
		// The Hub learns the push was refused; the record is kept.
		code := http.StatusBadRequest
		switch out.Reason {
		case ingest.ReasonSignatureMismatch, ingest.ReasonStaleTimestamp, ingest.ReasonReplayedJTI, ingest.ReasonMalformedSigHdr:
			code = http.StatusUnauthorized
		}
		httpapi.WriteJSON(w, code, quarantinedOf(rec, out))
	default:
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": out.Status, "session_id": out.SessionID, "position": out.Position})
	}
}

// run ingests raws and answers with the summary and the quarantined
// records.
func (ir *Routes) run(w http.ResponseWriter, r *http.Request, m ingest.Mapper, raws func(func(ingest.Raw) bool)) {
	var sum ingestSummary
	runner := ingest.Runner{Store: ir.store, Batch: ir.opts.Batch, OnResult: func(rec ledger.IngestRecord, res ledger.IngestResult) {
		if res.Status == ledger.IngestQuarantined && len(sum.Quarantined) < 100 {
			sum.Quarantined = append(sum.Quarantined, quarantinedOf(rec, res))
		}
	}}
	s, err := runner.Run(r.Context(), m, raws)
	sum.Summary = s
	if errors.Is(err, ingest.ErrUnreadable) {
		httpapi.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error(), "summary": sum})
		return
	}
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, sum)
}

// quarantinedJSON is a quarantined record in API answers. Raw is the
// record's bytes as text when they are UTF-8, RawBase64 always.
type quarantinedJSON struct {
	Seq       int64     `json:"seq,omitempty"`
	Source    string    `json:"source"`
	Key       string    `json:"key"`
	File      string    `json:"file"`
	Record    int64     `json:"record"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail"`
	Raw       *string   `json:"raw,omitempty"`
	RawBase64 string    `json:"raw_base64"`
	At        time.Time `json:"quarantined_at,omitzero"`
}

func quarantinedOf(rec ledger.IngestRecord, res ledger.IngestResult) quarantinedJSON {
	return quarantinedJSONOf(ledger.Quarantined{Source: rec.Source, Key: rec.Key, File: rec.File, Record: rec.Record, Reason: res.Reason, Detail: res.Detail, Raw: rec.Raw})
}

func quarantinedJSONOf(q ledger.Quarantined) quarantinedJSON {
	out := quarantinedJSON{Seq: q.Seq, Source: q.Source, Key: q.Key, File: q.File, Record: q.Record, Reason: q.Reason,
		Detail: q.Detail, RawBase64: base64.StdEncoding.EncodeToString(q.Raw), At: q.At}
	if utf8.Valid(q.Raw) {
		s := string(q.Raw)
		out.Raw = &s
	}
	return out
}

// ingestFilter reads source, after and limit.
func ingestFilter(r *http.Request) (ledger.IngestFilter, error) {
	q := r.URL.Query()
	f := ledger.IngestFilter{Source: q.Get("source")}
	for _, p := range []struct {
		name string
		dst  any
	}{{"after", &f.After}, {"limit", &f.Limit}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("%w: %s must be a non-negative integer", httpapi.ErrBadRequest, p.name)
		}
		switch d := p.dst.(type) {
		case *int64:
			*d = n
		case *int:
			*d = int(min(n, ledger.MaxPageSize))
		}
	}
	return f, nil
}

// quarantine lists quarantined records, oldest first:
// GET /api/v1/ingest/quarantine?source=&after=SEQ&limit=N.
func (ir *Routes) quarantine(w http.ResponseWriter, r *http.Request) {
	f, err := ingestFilter(r)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	qs, err := ir.store.Quarantined(r.Context(), f)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	out := make([]quarantinedJSON, len(qs))
	for i, q := range qs {
		out[i] = quarantinedJSONOf(q)
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"records": out, "next": nextSeq(len(qs), f.Limit, func() int64 { return qs[len(qs)-1].Seq })})
}

// flagged lists ingested records carrying a flag, oldest first:
// GET /api/v1/ingest/flagged?flag=fail_open&source=&after=SEQ&limit=N.
func (ir *Routes) flagged(w http.ResponseWriter, r *http.Request) {
	flag := r.URL.Query().Get("flag")
	if flag == "" {
		ir.fail(w, r, fmt.Errorf("%w: flag is required (fail_open, fail_open_keyless, unlock_bypass, unlock_filter_error)", httpapi.ErrBadRequest))
		return
	}
	f, err := ingestFilter(r)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	rs, err := ir.store.Flagged(r.Context(), flag, f)
	if err != nil {
		ir.fail(w, r, err)
		return
	}
	type flaggedJSON struct {
		Seq       int64    `json:"seq"`
		Source    string   `json:"source"`
		Key       string   `json:"key"`
		SessionID string   `json:"session_id"`
		Position  int64    `json:"position"`
		EntryHash string   `json:"entry_hash"`
		Flags     []string `json:"flags"`
		File      string   `json:"file"`
		Record    int64    `json:"record"`
	}
	out := make([]flaggedJSON, len(rs))
	for i, x := range rs {
		out[i] = flaggedJSON{x.Seq, x.Source, x.Key, x.SessionID, x.Position, x.EntryHash.String(), x.Flags, x.File, x.Record}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"records": out, "next": nextSeq(len(rs), f.Limit, func() int64 { return rs[len(rs)-1].Seq })})
}

// nextSeq is the after= of the next page, or nil on the last page.
func nextSeq(n, limit int, last func() int64) any {
	if n == 0 || n < ledger.PageSize(limit) {
		return nil
	}
	return strconv.FormatInt(last(), 10)
}

func (ir *Routes) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && httpapi.StatusFor(err) == http.StatusInternalServerError {
		return // the client went away; nobody reads the answer
	}
	httpapi.Fail(ir.log, w, r, err)
}
