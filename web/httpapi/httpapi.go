// Package httpapi holds the conventions every package of acsledger's HTTP
// API answers by: JSON bodies, errors mapped to statuses in one place
// (StatusFor), and strict parsing of path and query parameters. The
// packages that serve routes (web/access, web/api, web/ingestapi,
// web/stats) answer through it, so that a route's error looks the same
// whichever package serves it.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
)

// statusError is an error of the web packages that carries its status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) HTTPStatus() int { return e.status }

// NewError returns a sentinel error that StatusFor answers with status.
// The web packages declare their own errors with it (errors.Is matches
// them through any wrapping), so that the one switch below need not know
// each of them.
func NewError(status int, msg string) error { return &statusError{status, msg} }

// ErrBadRequest marks malformed query parameters and bodies.
var ErrBadRequest = NewError(http.StatusBadRequest, "bad request")

// StatusFor maps store and request errors to HTTP statuses. It is the
// only place that does: an error that carries its own status (NewError,
// access control's refusals) gets it, the ledger's, evidence's and
// replay's sentinels are mapped here.
func StatusFor(err error) int {
	var maxErr *http.MaxBytesError
	var own interface{ HTTPStatus() int }
	switch {
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &own):
		return own.HTTPStatus()
	case errors.Is(err, ledger.ErrTokenExists):
		return http.StatusConflict
	case errors.Is(err, evidence.ErrRunning), errors.Is(err, replay.ErrAmbiguous), errors.Is(err, evidence.ErrNotAnchored),
		errors.Is(err, replay.ErrStoredParamsMismatch):
		return http.StatusConflict
	case errors.Is(err, replay.ErrBadRequest), errors.Is(err, replay.ErrParamsRequired),
		errors.Is(err, evidence.ErrNoLog):
		return http.StatusBadRequest
	case errors.Is(err, replay.ErrParamsMismatch), errors.Is(err, replay.ErrNotPolicyDecision):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ledger.ErrInvalidEntry), errors.Is(err, ledger.ErrInvalidSearch), errors.Is(err, ledger.ErrInvalidRetention):
		return http.StatusBadRequest
	case errors.Is(err, ledger.ErrHeld):
		return http.StatusConflict
	case errors.Is(err, ledger.ErrErased):
		return http.StatusGone
	case errors.Is(err, ledger.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ledger.ErrHashMismatch), errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrAgentMismatch),
		errors.Is(err, ledger.ErrWriterMismatch), errors.Is(err, ledger.ErrHeadMoved):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Fail answers err with the status StatusFor gives it; an internal error
// is logged and answered without its message. Every route fails through
// it.
func Fail(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	code := StatusFor(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	WriteError(w, code, msg)
}

// ErrorBody is the JSON of an error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// WriteError answers code with msg in an ErrorBody.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, ErrorBody{Error: msg})
}

// WriteJSON answers code with v as JSON, HTML characters unescaped.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// List is {key: [conv(item), ...]}: an empty array, never null, when
// there are no items.
func List[T, J any](key string, items []T, conv func(T) J) map[string][]J {
	out := make([]J, 0, len(items))
	for _, it := range items {
		out = append(out, conv(it))
	}
	return map[string][]J{key: out}
}

// WriteList answers 200 with List(key, items, conv).
func WriteList[T, J any](w http.ResponseWriter, key string, items []T, conv func(T) J) {
	WriteJSON(w, http.StatusOK, List(key, items, conv))
}

// RefuseUnread readies the refusal of a request whose body will not be
// read (busy, rate-limited, not authenticated, not allowed): if it has
// one, the connection closes after the answer. Otherwise the HTTP server
// reads up to 256 KiB of the body before the answer goes out, so a
// refused upload that arrives slowly would hold the refusal, and its
// goroutine, until the read timeout.
func RefuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// PathParam returns a path parameter decoded. chi matches on the escaped
// path when one exists, so an id holding "/" or "=" arrives still escaped
// ("a%2Fb"); a parameter that does not decode is kept as it came and
// simply finds nothing.
func PathParam(r *http.Request, name string) string { return unescape(chi.URLParam(r, name)) }

// RouteParam is PathParam for a route context the router has not
// installed on the request yet (access control finds the route first).
func RouteParam(rctx *chi.Context, name string) string { return unescape(rctx.URLParam(name)) }

func unescape(v string) string {
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// TimeParam parses the query parameter name, an RFC 3339 time; "" is the
// zero time.
func TimeParam(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: query parameter %s=%q is not an RFC 3339 time", ErrBadRequest, name, v)
	}
	return t, nil
}

// IntParam parses the query parameter name, a non-negative integer; ""
// is 0.
func IntParam(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: query parameter %s=%q is not a non-negative integer", ErrBadRequest, name, v)
	}
	return n, nil
}

// BoolParam parses the query parameter name of r, a boolean; absent is
// def.
func BoolParam(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s=%q is not a boolean", ErrBadRequest, name, v)
	}
	return b, nil
}
