// Package web is acsledger's HTTP server: it composes the packages that
// serve its routes (web/access, web/api, web/ingestapi, web/stats), puts
// access control in front of all of them, and holds the table of every
// route and who may use it (routes.go, docs/security.md). The Merkle
// log's endpoints (web/tlogserve), the UI (web/ui), the Guardian and
// /metrics are mounted beside them by the caller, on Router.
package web

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/export"
	"github.com/acsledger/acsledger/web/httpapi"
	"github.com/acsledger/acsledger/web/ingestapi"
	"github.com/acsledger/acsledger/web/retentionapi"
	"github.com/acsledger/acsledger/web/stats"
	"github.com/acsledger/acsledger/web/whatifapi"
)

// Store is what the server reads and writes of the ledger: the evidence
// API's view (api.Store), which holds what access control needs
// (access.Store). The ingest routes get their store through
// Options.Ingest.Store, the search and charts through Options.Search and
// Options.Charts.
type Store = api.Store

var _ access.Store = Store(nil)

// Options configure the handler. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// MaxEntryBytes caps a request body carrying one entry; 0 means
	// ledger.DefaultMaxEntryBytes.
	MaxEntryBytes int64
	// Evidence configures the evidence routes (web/api).
	Evidence EvidenceOptions
	// Auth configures access control (web/access, docs/security.md).
	Auth AuthOptions
	// Ingest configures the ingest routes (web/ingestapi); without its
	// Store they answer 501.
	Ingest IngestOptions
	// Ready is /readyz's check; nil means always ready.
	Ready Ready
	// Search is the compliance search (web/api); nil answers its routes
	// 501.
	Search Searcher
	// Charts feeds the log page's and the dashboard's charts
	// (web/stats); nil leaves the charts empty and /stats 501.
	Charts Charts
	// ReplicaLag reports the read replica's latest measured lag for
	// /stats and the dashboard; nil when reads go to the primary.
	ReplicaLag func() ReplicaLag
	// WhatIf configures the what-if runs (web/whatifapi); without its
	// Store they answer 501.
	WhatIf whatifapi.Options
	// Writes is where the store's writes go, when its reads may lag them
	// (serve --db-read reads from a replica): the scope check in front of
	// a write reads it, so that a session the replica has not replayed
	// yet is not taken for a new one. Nil: the store itself.
	Writes access.SessionReader
	// Export configures the event export routes (web/export): the pull
	// API and the push sinks' state; without its Store they answer 501.
	Export ExportOptions
	// Retention configures the admin routes of retention rules, legal
	// holds and erasure requests (web/retentionapi); without its Reader
	// and Admin they answer 501.
	Retention RetentionOptions
}

// ExportOptions configure web/export.
type ExportOptions = export.Options

// RetentionOptions configure the retention routes (web/retentionapi).
type RetentionOptions = retentionapi.Options

// Server serves the HTTP API over one store.
type Server struct {
	log    *slog.Logger
	ready  Ready
	router chi.Router
}

// New returns the HTTP handler for store.
func New(store Store, opts Options) *Server {
	s := &Server{log: opts.Logger, ready: opts.Ready}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	maxBody := opts.MaxEntryBytes
	if maxBody <= 0 {
		maxBody = ledger.DefaultMaxEntryBytes
	}
	writes := opts.Writes
	if writes == nil {
		writes = store
	}
	ac := access.New(store, writes, opts.Auth, s.log, maxBody)
	ev := api.New(store, writes, opts.Search, opts.Evidence, s.log, maxBody)
	charts := stats.New(opts.Charts, stats.Sources{Log: opts.Evidence.Log, Trust: ev.Trust(), Reverifier: ev.Reverifier(),
		ReplicaLag: opts.ReplicaLag, Now: ac.Now}, s.log)
	r := chi.NewRouter()
	r.Use(ac.Guard(r, AccessTable))
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	ac.MountLogin(r)
	ing := ingestapi.New(opts.Ingest, s.log)
	ing.MountOTLP(r)
	r.Route("/api/v1", func(r chi.Router) {
		ac.MountAPI(r)
		ev.Mount(r)
		charts.Mount(r)
		ing.Mount(r)
		export.New(opts.Export, s.log).Mount(r)
		retentionapi.New(opts.Retention, s.log).Mount(r)
		whatifapi.New(opts.WhatIf, s.log).Mount(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, http.StatusNotFound, fmt.Sprintf("no such resource: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	})
	s.router = r
	return s
}

// Router exposes the router so that other packages can mount routes beside
// the API (the Merkle log's public endpoints, the Guardian).
func (s *Server) Router() chi.Router { return s.router }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
