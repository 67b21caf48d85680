// Package web is acsledger's HTTP surface: the health check, the /api/v1
// evidence API over a ledger.Store, and access control for every route
// (auth.go, AccessTable, docs/security.md). Handlers are thin: they decode,
// call the store and encode; errors map to statuses in one place
// (statusFor).
package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
)

// Options configure the handler. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// MaxEntryBytes caps a request body carrying one entry; 0 means
	// ledger.DefaultMaxEntryBytes.
	MaxEntryBytes int64
	// Evidence configures the evidence routes (web/evidence.go).
	Evidence EvidenceOptions
	// Auth configures access control (web/auth.go, docs/security.md).
	Auth AuthOptions
	// Ingest configures the ingest routes (web/ingest.go).
	Ingest IngestOptions
	// Ready is /readyz's check; nil means always ready.
	Ready Ready
	// Search is the compliance search (web/search.go); nil answers its
	// routes 501.
	Search Searcher
	// Charts feeds the log page's and the dashboard's charts
	// (web/stats.go); nil leaves the charts empty and /stats 501.
	Charts Charts
	// ReplicaLag reports the read replica's latest measured lag for
	// /stats and the dashboard; nil when reads go to the primary.
	ReplicaLag func() ReplicaLag
	// Writes is the store the store's writes go to, when its reads may
	// lag them (serve --db-read reads from a replica): the scope check in
	// front of a write reads it, so that a session the replica has not
	// replayed yet is not taken for a new one. Nil: the store itself.
	Writes ledger.GuardianStore
}

// Server serves the HTTP API over one store.
type Server struct {
	store   ledger.GuardianStore
	writes  ledger.GuardianStore // Options.Writes
	log     *slog.Logger
	maxBody int64
	ready   Ready
	router  chi.Router
	auth    *auth
	// acsBound binds ACS sessions to tokens (AuthOptions.ACSRequireToken).
	acsBound *acsBindings
	search   Searcher
	charts   Charts
	lag      func() ReplicaLag
}

// New returns the HTTP handler for store.
func New(store ledger.GuardianStore, opts Options) *Server {
	s := &Server{store: store, log: opts.Logger, maxBody: opts.MaxEntryBytes, auth: newAuth(opts.Auth), acsBound: newACSBindings(), ready: opts.Ready, search: opts.Search, charts: opts.Charts, lag: opts.ReplicaLag, writes: opts.Writes}
	if s.writes == nil {
		s.writes = store
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = ledger.DefaultMaxEntryBytes
	}
	r := chi.NewRouter()
	r.Use(s.guard(r))
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Post("/ui/login", s.login)
	r.Post("/ui/logout", s.logout)
	r.Route("/api/v1", func(r chi.Router) {
		r.Get("/whoami", s.whoami)
		r.Get("/admin/tokens", s.listTokens)
		r.Post("/admin/tokens", s.createToken)
		r.Post("/admin/tokens/{name}/revoke", s.revokeToken)
		r.Get("/sessions", s.listSessions)
		r.Get("/sessions/{session_id}", s.getSession)
		r.Get("/sessions/{session_id}/entries", s.listEntries)
		r.Post("/sessions/{session_id}/entries", s.appendEntry)
		s.mountEvidence(r, opts.Evidence)
		s.mountIngest(r, opts.Ingest)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such resource: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	})
	s.router = r
	return s
}

// Router exposes the router so that other packages can mount routes beside
// the API (the Merkle log's public endpoints, the Guardian).
func (s *Server) Router() chi.Router { return s.router }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// statusFor maps store and request errors to HTTP statuses. It is the only
// place that does.
func statusFor(err error) int {
	var maxErr *http.MaxBytesError
	var authErr *authFailure
	switch {
	case errors.As(err, &authErr):
		return authErr.status
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, errOutOfScope), errors.Is(err, errAgentRequired), errors.Is(err, errReserved):
		return http.StatusForbidden
	case errors.Is(err, errBadToken):
		return http.StatusBadRequest
	case errors.Is(err, ledger.ErrTokenExists):
		return http.StatusConflict
	case errors.Is(err, errNoTokenStore), errors.Is(err, errNoSearch):
		return http.StatusNotImplemented
	case errors.Is(err, evidence.ErrRunning), errors.Is(err, replay.ErrAmbiguous),
		errors.Is(err, replay.ErrStoredParamsMismatch):
		return http.StatusConflict
	case errors.Is(err, errMalformedBundle), errors.Is(err, replay.ErrBadRequest), errors.Is(err, replay.ErrParamsRequired),
		errors.Is(err, evidence.ErrNoLog):
		return http.StatusBadRequest
	case errors.Is(err, replay.ErrParamsMismatch), errors.Is(err, replay.ErrNotPolicyDecision):
		return http.StatusUnprocessableEntity
	case errors.Is(err, errBadRequest), errors.Is(err, ledger.ErrInvalidEntry), errors.Is(err, ledger.ErrInvalidSearch):
		return http.StatusBadRequest
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

// errBadRequest marks malformed query parameters.
var errBadRequest = errors.New("bad request")

// fail writes err with its status; internal errors are logged and their
// text is not shown to the client.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) { failWith(s.log, w, r, err) }

// failWith answers err with the status statusFor gives it; an internal
// error is logged and answered without its message. Every route group
// fails through it.
func failWith(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	code := statusFor(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	writeError(w, code, msg)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

// refuseUnread readies the refusal of a request whose body will not be
// read (busy, rate-limited, not authenticated, not allowed): if it has
// one, the connection closes after the answer. Otherwise the HTTP server
// reads up to 256 KiB of the body before the answer goes out, so a
// refused upload that arrives slowly would hold the refusal, and its
// goroutine, until the read timeout.
func refuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
