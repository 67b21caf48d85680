// Package export serves the ledger's events over HTTP (docs/export.md,
// docs/api.md): GET /api/v1/events, the pull API, answers NDJSON lines
// {"cursor", "event"} in the Merkle log's order and, with follow=1, keeps
// the stream open; GET /api/v1/exports shows each push sink's delivery
// state. Reading and encoding are ledger/export's.
package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Page sizes of the pull API.
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
	// maxScanPerPage bounds the leaves one answer without follow scans
	// for a scoped token whose agents are rare.
	maxScanPerPage = 10 * export.MaxLeaves
)

// Options configure the routes. Without Store they answer 501.
type Options struct {
	Store export.Store
	// Origin is the ledger's log origin, the CloudEvents source.
	Origin string
	// Sinks reports the push sinks' state; nil when none are configured.
	Sinks func() []export.Status
	// Heartbeat is the longest a follow stream stays silent (default
	// 10s; the contract is at most 15s). Poll is how often it looks for
	// new leaves when caught up (default 250ms).
	Heartbeat, Poll time.Duration
}

// Handler serves the routes.
type Handler struct {
	o   Options
	log *slog.Logger
}

// New returns the handler of o.
func New(o Options, log *slog.Logger) *Handler {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	return &Handler{o: o, log: log}
}

// Mount adds the routes to r (the /api/v1 router).
func (h *Handler) Mount(r chi.Router) {
	r.Get("/events", h.events)
	r.Get("/exports", h.exports)
}

// request is a parsed GET /api/v1/events.
type request struct {
	enc    export.Encoder
	after  export.Cursor
	limit  int
	follow bool
	scope  string
}

func (h *Handler) parse(r *http.Request) (request, error) {
	q := r.URL.Query()
	var req request
	f, err := trace.ParseFormat(q.Get("format"))
	if err != nil {
		return req, httpapi.NewError(http.StatusBadRequest, "format: "+err.Error())
	}
	req.enc = export.Encoder{Format: f, Origin: h.o.Origin}
	if req.after, err = export.ParseAfter(q.Get("after")); err != nil {
		return req, httpapi.NewError(http.StatusBadRequest, "after: "+err.Error())
	}
	if req.limit, err = httpapi.IntParam(q.Get("limit"), "limit"); err != nil {
		return req, err
	}
	if req.limit < 0 || req.limit > MaxLimit {
		return req, httpapi.NewError(http.StatusBadRequest, fmt.Sprintf("limit: %d is out of range (1 to %d)", req.limit, MaxLimit))
	}
	if req.follow, err = httpapi.BoolParam(r, "follow", false); err != nil {
		return req, err
	}
	if req.limit == 0 && !req.follow {
		req.limit = DefaultLimit
	}
	if p := access.PrincipalFrom(r.Context()); p != nil {
		req.scope = p.Scope
	}
	return req, nil
}

// line is one NDJSON line of the pull API. A line without event is a
// progress line: a heartbeat, or the end of a scoped page that scanned
// leaves without an event in scope; resuming after its cursor is exact.
type line struct {
	Cursor    string          `json:"cursor,omitempty"`
	Event     json.RawMessage `json:"event,omitempty"`
	Heartbeat string          `json:"heartbeat,omitempty"`
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	if h.o.Store == nil {
		httpapi.WriteError(w, http.StatusNotImplemented, "this server has no event export")
		return
	}
	req, err := h.parse(r)
	if err != nil {
		httpapi.Fail(h.log, w, r, err)
		return
	}
	ctx := r.Context()
	// Read the first page before answering, so that a store error is a
	// status, not a cut stream.
	first, err := export.Read(ctx, h.o.Store, req.enc, req.after, h.pageSize(req, 0), req.scope)
	if err != nil {
		httpapi.Fail(h.log, w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 64<<10), scope: req.scope, flushed: time.Now()}
	if err := h.serve(ctx, s, req, first); err != nil && ctx.Err() == nil {
		h.log.Warn("export: event stream ended early", "err", err)
		s.write(line{Heartbeat: time.Now().UTC().Format(time.RFC3339Nano), Cursor: s.last})
		s.bw.Flush()
	}
}

// pageSize is how many events the next Read of req may return, sent
// events already written.
func (h *Handler) pageSize(req request, sent int) int {
	if req.limit == 0 {
		return DefaultLimit
	}
	return min(DefaultLimit, req.limit-sent)
}

// stream writes lines and keeps the server's write deadline ahead of a
// long follow stream.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	bw      *bufio.Writer
	scope   string
	last    string // the last cursor written
	sent    int
	buf     []byte
	flushed time.Time
}

func (s *stream) write(l line) error {
	if l.Heartbeat == "" && len(l.Event) > 0 && plainCursor(l.Cursor) {
		// An event line, most of a stream, put together as it stands: the
		// event is the compact JSON the encoder wrote (json.Marshal would
		// scan it again to compact and escape it) and the cursor is digits
		// and dots.
		s.buf = append(append(s.buf[:0], `{"cursor":"`...), l.Cursor...)
		s.buf = append(append(append(s.buf, `","event":`...), l.Event...), "}\n"...)
	} else {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		s.buf = append(append(s.buf[:0], b...), '\n')
	}
	if _, err := s.bw.Write(s.buf); err != nil {
		return err
	}
	if l.Cursor != "" {
		s.last = l.Cursor
	}
	return nil
}

// plainCursor reports whether c is a cursor as export.Cursor writes it,
// which needs no escape in JSON.
func plainCursor(c string) bool {
	if c == "" {
		return false
	}
	for i := range len(c) {
		if (c[i] < '0' || c[i] > '9') && c[i] != '.' {
			return false
		}
	}
	return true
}

func (s *stream) flush() error {
	// Each flush earns the stream another minute to send its next line.
	s.flushed = time.Now()
	s.rc.SetWriteDeadline(s.flushed.Add(time.Minute))
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// heartbeat sends a heartbeat line with the cursor to resume from, next.
func (s *stream) heartbeat(next export.Cursor) error {
	if err := s.write(line{Heartbeat: time.Now().UTC().Format(time.RFC3339Nano), Cursor: next.String()}); err != nil {
		return err
	}
	return s.flush()
}

func (s *stream) events(p export.Page) error {
	for _, ev := range p.Events {
		if s.scope != "" && strings.HasPrefix(access.LogAgentID, s.scope) && strings.HasPrefix(ev.SessionID, access.LogAgentID+"-") {
			// The access log is only for unscoped admins and auditors
			// (access.Principal.Sees), even under a scope that is a
			// prefix of its agent id.
			continue
		}
		if err := s.write(line{Cursor: ev.Cursor, Event: ev.JSON}); err != nil {
			return err
		}
		s.sent++
	}
	return nil
}

func (h *Handler) serve(ctx context.Context, s *stream, req request, p export.Page) error {
	scanned := p.Next.Leaf - req.after.Leaf
	for {
		if err := s.events(p); err != nil {
			return err
		}
		if req.limit > 0 && s.sent >= req.limit {
			return s.flush()
		}
		if !req.follow {
			if p.AtEnd() || scanned >= maxScanPerPage {
				if next := p.Next.String(); next != "" && next != s.last {
					if err := s.write(line{Cursor: next, Heartbeat: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
						return err
					}
				}
				return s.flush()
			}
		} else if err := h.waitFor(ctx, s, p); err != nil {
			return err
		}
		// A scoped follower scanning a long stretch of other agents'
		// leaves still hears from the server within the heartbeat.
		if req.follow && time.Since(s.flushed) >= h.o.Heartbeat {
			if err := s.heartbeat(p.Next); err != nil {
				return err
			}
		}
		from := p.Next
		var err error
		p, err = export.Read(ctx, h.o.Store, req.enc, from, h.pageSize(req, s.sent), req.scope)
		if err != nil {
			return err
		}
		scanned += p.Next.Leaf - from.Leaf
	}
}

// waitFor flushes what was written and, when p reached the end of the
// log, waits for it to grow, sending a heartbeat line (with the cursor to
// resume from) at least every Heartbeat.
func (h *Handler) waitFor(ctx context.Context, s *stream, p export.Page) error {
	if err := s.flush(); err != nil {
		return err
	}
	if !p.AtEnd() {
		return nil
	}
	beat := time.NewTimer(h.o.Heartbeat)
	defer beat.Stop()
	poll := time.NewTicker(h.o.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			if err := s.heartbeat(p.Next); err != nil {
				return err
			}
			beat.Reset(h.o.Heartbeat)
		case <-poll.C:
			size, err := h.o.Store.LogSize(ctx)
			if err != nil {
				return err
			}
			if size > p.Next.Leaf {
				return nil
			}
		}
	}
}

// sinkList is GET /api/v1/exports: the configured sinks' state, then the
// cursors stored for names no sink has now.
type sinkList struct {
	Sinks []sinkState `json:"sinks"`
}

type sinkState struct {
	export.Status
	Configured bool `json:"configured"`
}

func (h *Handler) exports(w http.ResponseWriter, r *http.Request) {
	out := sinkList{Sinks: []sinkState{}}
	seen := map[string]bool{}
	if h.o.Sinks != nil {
		for _, st := range h.o.Sinks() {
			out.Sinks = append(out.Sinks, sinkState{Status: st, Configured: true})
			seen[st.Name] = true
		}
	}
	if h.o.Store != nil {
		cs, err := h.o.Store.ExportCursors(r.Context())
		if err != nil {
			httpapi.Fail(h.log, w, r, err)
			return
		}
		size, err := h.o.Store.LogSize(r.Context())
		if err != nil {
			httpapi.Fail(h.log, w, r, err)
			return
		}
		for _, c := range cs {
			if seen[c.Name] {
				continue
			}
			out.Sinks = append(out.Sinks, sinkState{Status: export.StoredStatus(c, size)})
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}
