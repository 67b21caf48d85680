// Package api is acsledger's evidence API under /api/v1: sessions and
// their entries (read, and appended by writers), the timeline's steps,
// the compliance search and its export, recorded decisions and their
// replay, evidence bundles, online verification of a stored session or an
// uploaded bundle, and whole-ledger re-verification (docs/api.md).
// Handlers are thin: they decode, call the store or the evidence and
// replay packages, and encode; errors map to statuses in one place
// (httpapi.StatusFor). Who may use which route is web/access's job; the
// handlers only narrow what they answer to the caller's scope.
package api

import (
	"context"
	"log/slog"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/access"
)

// Store is what the evidence API reads and writes of the ledger: the
// sessions and their entries (ledger.Store), the request params and signed
// response stored beside each entry, and the recorded policy bundles
// (ledger.StepReader and the rest document each). Request returns an error matching
// ledger.ErrErased for erased params and ledger.ErrNotFound where none
// were stored; Response ledger.ErrNotFound for an entry without one.
type Store interface {
	ledger.Store
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)
	PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error)
	PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error)
}

// The evidence and replay packages read the store through the API's view
// of it.
var (
	_ evidence.Store = Store(nil)
	_ replay.Store   = Store(nil)
)

// DefaultMaxBundleBytes caps an uploaded evidence bundle.
const DefaultMaxBundleBytes = 64 << 20

// Options configure the evidence routes: bundle export, online
// verification, whole-ledger re-verification and decision replay. The zero
// value serves them without a Merkle log (bundles are not anchored and
// verify with not_anchored), with the keys bundles carry, and with the
// admin routes disabled.
type Options struct {
	// Log is the Merkle log bundles are anchored in; nil for none (leave
	// it nil rather than storing a nil *tlog.Log in it).
	Log evidence.Log
	// Bundle says which keys bundles carry (the Guardian's public response
	// keys, the witness policy).
	Bundle evidence.Options
	// Trust is what online verification trusts: the response keys (HMAC
	// IKMs included, which no bundle carries), the log keys and the witness
	// policy. Nil means the keys of the bundle itself, with the notice
	// keys_from_bundle.
	Trust *verify.Trust
	// Reverifier runs whole-ledger re-verification for the admin routes;
	// the caller runs its Schedule. Nil makes one from the fields above
	// (runs then only start through POST /api/v1/admin/reverify).
	Reverifier *evidence.Reverifier
	// MaxBundleBytes caps an uploaded bundle; 0 means DefaultMaxBundleBytes.
	MaxBundleBytes int64
	// MaxConcurrentVerifications bounds the uploaded bundles verified at
	// once; 0 means DefaultMaxConcurrentVerifications. More are answered
	// 503 with Retry-After.
	MaxConcurrentVerifications int
}

// API serves the evidence routes over one store.
type API struct {
	store Store
	// writes is where a scoped token's append reads the session it
	// extends (access.New's writes).
	writes  access.SessionReader
	search  Searcher
	opts    Options
	log     *slog.Logger
	maxBody int64
	// verifying holds one token per upload being verified.
	verifying chan struct{}
}

// New returns the evidence API over store. writes is where appends read
// the session they extend (the primary, when store reads from a replica);
// search is the compliance search, nil to answer its routes 501; maxBody
// caps a body carrying one entry.
func New(store Store, writes access.SessionReader, search Searcher, opts Options, log *slog.Logger, maxBody int64) *API {
	if opts.MaxBundleBytes <= 0 {
		opts.MaxBundleBytes = DefaultMaxBundleBytes
	}
	if opts.MaxConcurrentVerifications <= 0 {
		opts.MaxConcurrentVerifications = DefaultMaxConcurrentVerifications
	}
	a := &API{store: store, writes: writes, search: search, opts: opts, log: log, maxBody: maxBody,
		verifying: make(chan struct{}, opts.MaxConcurrentVerifications)}
	if opts.Reverifier == nil {
		a.opts.Reverifier = evidence.NewReverifier(store, opts.Log, opts.Bundle, a.Trust(), nil, log)
	}
	return a
}

// Mount adds the evidence routes to r, the /api/v1 router.
func (a *API) Mount(r chi.Router) {
	r.Get("/sessions", a.listSessions)
	r.Get("/sessions/{session_id}", a.getSession)
	r.Get("/sessions/{session_id}/entries", a.listEntries)
	r.Post("/sessions/{session_id}/entries", a.appendEntry)
	r.Get("/sessions/{session_id}/bundle", a.bundle)
	r.Get("/sessions/{session_id}/entries/{position}/receipt", a.receipt)
	r.Get("/sessions/{session_id}/verify", a.verifySession)
	r.Post("/verify/bundle", a.verifyBundle)
	r.Post("/decisions/{request_id}/replay", a.replay)
	r.Get("/policies", a.listPolicies)
	r.Get("/decisions/{request_id}", a.getDecision)
	r.Get("/search", a.searchPage)
	r.Get("/search/export", a.exportSearch)
	r.Get("/integrity", a.integrity)
	r.Get("/sessions/{session_id}/steps", a.listSteps)
	r.Post("/admin/reverify", a.startReverify)
	r.Get("/admin/reverify", a.reverifyStatus)
}

// Trust is what online verification trusts (Options.Trust, or nothing
// beyond the bundle's own keys).
func (a *API) Trust() *verify.Trust {
	if a.opts.Trust != nil {
		return a.opts.Trust
	}
	return &verify.Trust{}
}

// Reverifier runs whole-ledger re-verification (Options.Reverifier, or the
// one New made).
func (a *API) Reverifier() *evidence.Reverifier { return a.opts.Reverifier }
