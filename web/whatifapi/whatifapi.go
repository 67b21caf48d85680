// Package whatifapi serves what-if runs over HTTP (docs/whatif.md,
// docs/api.md "What-if"): an admin or auditor starts a run of a candidate
// policy (an uploaded OPA bundle archive, or a recorded bundle version)
// over the recorded steps a filter selects, or around one decision
// (incident mode), follows its progress, reads its report, and may cancel
// it. Runs are bounded: few at a time per server (one by default), a cap
// on the steps of each, and a share of the CPU so that live decisions
// keep theirs. The run itself is guardian/whatif's; this package decodes,
// starts, keeps the latest runs in memory, and encodes.
package whatifapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/guardian/whatif"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Store is what the what-if routes read: the recorded steps
// (whatif.Store), a recorded bundle version to run as the candidate
// (PolicyBundle, ledger.ErrNotFound for an unknown one), and, in incident
// mode, the decision's entry and its session (EntriesByStep and Session,
// with ledger.Store's contracts).
type Store interface {
	whatif.Store
	replay.StepFinder
	PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error)
	Session(ctx context.Context, sessionID string) (ledger.Session, error)
}

// Defaults of Options.
const (
	DefaultMaxRuns     = 1
	DefaultMaxSteps    = 1_000_000
	DefaultShare       = 0.1
	DefaultWindow      = time.Hour
	maxKeptRuns        = 16
	maxChangesReported = 1000
)

// Options bound the runs. The zero value serves them with the defaults;
// without a Store the routes answer 501.
type Options struct {
	Store Store
	// MaxRuns is how many runs may go at once; 0 means DefaultMaxRuns.
	MaxRuns int
	// MaxSteps caps one run's steps (its limit); 0 means DefaultMaxSteps.
	MaxSteps int64
	// Share is the part of the wall time a run may work
	// (whatif.Options.Share); 0 means DefaultShare, 1 no rest.
	Share float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Errors the routes answer with.
var (
	errNoStore = httpapi.NewError(http.StatusNotImplemented, "what-if runs are not configured on this server")
	errBusy    = httpapi.NewError(http.StatusTooManyRequests, "another what-if run is in progress; wait for it or cancel it")
	errNoRun   = httpapi.NewError(http.StatusNotFound, "no such what-if run")
)

// badRequest is a refused run: the message names the parameter.
type badRequest struct{ msg string }

func (e *badRequest) Error() string   { return e.msg }
func (e *badRequest) HTTPStatus() int { return http.StatusBadRequest }

func bad(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// API serves the what-if routes.
type API struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	runs   map[string]*run
	order  []string // run ids, oldest first
	active int
}

// New returns the what-if routes.
func New(opts Options, log *slog.Logger) *API {
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.Share <= 0 {
		opts.Share = DefaultShare
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &API{opts: opts, log: log, runs: map[string]*run{}}
}

// Mount adds the routes to r, the /api/v1 router.
func (a *API) Mount(r chi.Router) {
	r.Post("/whatif", a.start)
	r.Get("/whatif/{run_id}", a.status)
	r.Post("/whatif/{run_id}/cancel", a.cancelRun)
}

// run is one what-if run and what it has found so far.
type run struct {
	mu     sync.Mutex
	id     string
	scope  string // the starting principal's scope
	cancel context.CancelFunc
	view   RunJSON
}

// RunJSON is a run as the API answers it.
type RunJSON struct {
	ID string `json:"id"`
	// State is running, done, failed or cancelled.
	State      string          `json:"state"`
	Candidate  string          `json:"candidate"`
	Filter     FilterJSON      `json:"filter"`
	Focus      *ledger.StepRef `json:"focus,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Progress   whatif.Progress `json:"progress"`
	// Summary is the report, once the run is done.
	Summary *whatif.Summary `json:"summary,omitempty"`
	// Changes are the changed steps found so far, the first
	// maxChangesReported of them.
	Changes []whatif.Change `json:"changes"`
	Error   string          `json:"error,omitempty"`
}

// FilterJSON is the run's filter as the API answers it.
type FilterJSON struct {
	SessionID   string     `json:"session_id,omitempty"`
	AgentID     string     `json:"agent_id,omitempty"`
	AgentPrefix string     `json:"agent,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
	Tool        string     `json:"tool,omitempty"`
	Decision    string     `json:"decision,omitempty"`
	Source      string     `json:"source,omitempty"`
	Limit       int64      `json:"limit,omitempty"`
}

// recordedCandidate is the JSON body naming a recorded bundle version.
type recordedCandidate struct {
	PolicyID      string `json:"policy_id"`
	PolicyVersion string `json:"policy_version"`
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { httpapi.Fail(a.log, w, r, err) }

// start decodes a run, refuses it before any step is evaluated if its
// candidate or filter is bad, and starts it.
func (a *API) start(w http.ResponseWriter, r *http.Request) {
	if a.opts.Store == nil {
		a.fail(w, r, errNoStore)
		return
	}
	p := access.PrincipalFrom(r.Context())
	f, limit, focus, err := a.filter(r, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	b, err := a.candidate(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := whatif.NewCandidate(r.Context(), b, f.Source != "opa")
	if err != nil {
		a.fail(w, r, &badRequest{err.Error()})
		return
	}
	if limit > a.opts.MaxSteps {
		a.fail(w, r, bad("limit %d is over the cap of %d steps per run", limit, a.opts.MaxSteps))
		return
	}
	if limit == 0 {
		limit = a.opts.MaxSteps
	}
	runOpts := whatif.Options{Filter: f, Limit: limit, MaxSteps: a.opts.MaxSteps, Share: a.opts.Share, Focus: focus}
	if err := whatif.Validate(c, runOpts); err != nil {
		a.fail(w, r, &badRequest{strings.ReplaceAll(err.Error(), "--", "")})
		return
	}

	a.mu.Lock()
	if a.active >= a.opts.MaxRuns {
		a.mu.Unlock()
		w.Header().Set("Retry-After", "10")
		a.fail(w, r, errBusy)
		return
	}
	a.active++
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	ru := &run{id: acs.NewUUID(), cancel: cancel, view: RunJSON{
		State: "running", Candidate: b.ID + "@" + b.Version, Filter: filterJSON(f, limit), Focus: focus,
		StartedAt: a.opts.Now().UTC(), Changes: []whatif.Change{},
	}}
	if p != nil {
		ru.scope = p.Scope
	}
	ru.view.ID = ru.id
	a.runs[ru.id] = ru
	a.order = append(a.order, ru.id)
	a.forgetOld()
	a.mu.Unlock()

	go a.execute(ctx, ru, c, runOpts)
	ru.mu.Lock()
	view := ru.view
	ru.mu.Unlock()
	w.Header().Set("Location", "/api/v1/whatif/"+ru.id)
	httpapi.WriteJSON(w, http.StatusAccepted, view)
}

// forgetOld drops the oldest finished runs past maxKeptRuns. a.mu is held.
func (a *API) forgetOld() {
	for len(a.order) > maxKeptRuns {
		dropped := false
		for i, id := range a.order {
			ru := a.runs[id]
			ru.mu.Lock()
			done := ru.view.State != "running"
			ru.mu.Unlock()
			if done {
				delete(a.runs, id)
				a.order = append(a.order[:i], a.order[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}

func (a *API) execute(ctx context.Context, ru *run, c *whatif.Candidate, opts whatif.Options) {
	defer func() {
		ru.cancel()
		a.mu.Lock()
		a.active--
		a.mu.Unlock()
	}()
	opts.Progress = func(p whatif.Progress) {
		ru.mu.Lock()
		ru.view.Progress = p
		ru.mu.Unlock()
	}
	sum, err := whatif.Run(ctx, a.opts.Store, c, opts, func(ch whatif.Change) error {
		ru.mu.Lock()
		if len(ru.view.Changes) < maxChangesReported {
			ru.view.Changes = append(ru.view.Changes, ch)
		}
		ru.mu.Unlock()
		return nil
	})
	ru.mu.Lock()
	defer ru.mu.Unlock()
	now := a.opts.Now().UTC()
	ru.view.FinishedAt = &now
	switch {
	case errors.Is(err, context.Canceled):
		ru.view.State = "cancelled"
	case err != nil:
		ru.view.State = "failed"
		ru.view.Error = "the run failed"
		if errors.Is(err, whatif.ErrBadRun) {
			ru.view.Error = err.Error()
		}
		a.log.Error("what-if run failed", "run", ru.id, "err", err)
	default:
		ru.view.State = "done"
		ru.view.Summary = sum
		ru.view.Progress = whatif.Progress{Read: sum.Read, Evaluated: sum.Evaluated, Changed: sum.Changed, NotReplayable: sum.NotReplayable, At: ru.view.Progress.At}
	}
}

// lookup returns the run named in the path, if the caller may see it: a
// scoped principal sees only runs started within its own scope.
func (a *API) lookup(r *http.Request) (*run, error) {
	a.mu.Lock()
	ru := a.runs[httpapi.PathParam(r, "run_id")]
	a.mu.Unlock()
	if ru == nil {
		return nil, errNoRun
	}
	if p := access.PrincipalFrom(r.Context()); p != nil && p.Scope != "" && p.Scope != ru.scope {
		return nil, errNoRun
	}
	return ru, nil
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	ru, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ru.mu.Lock()
	view := ru.view
	view.Changes = append([]whatif.Change{}, ru.view.Changes...)
	ru.mu.Unlock()
	httpapi.WriteJSON(w, http.StatusOK, view)
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	ru, err := a.lookup(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ru.cancel()
	ru.mu.Lock()
	view := ru.view
	ru.mu.Unlock()
	httpapi.WriteJSON(w, http.StatusAccepted, view)
}

// candidate reads the candidate bundle: an OPA bundle archive as the body
// (application/gzip), or a JSON body naming a recorded version.
func (a *API) candidate(w http.ResponseWriter, r *http.Request) (*policy.Bundle, error) {
	label := r.URL.Query().Get("label")
	if label == "" {
		label = "candidate"
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/gzip", "application/x-gzip", "application/octet-stream":
		b, err := whatif.ReadArchive(http.MaxBytesReader(w, r.Body, whatif.DefaultMaxBundleBytes), "candidate", label)
		if err != nil {
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				return nil, err
			}
			return nil, &badRequest{err.Error()}
		}
		return b, nil
	case "application/json":
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		var req recordedCandidate
		if _, err := acs.Canonicalize(body); err != nil {
			return nil, bad("the body is not one well-formed JSON object: %v", err)
		}
		if err := dec.Decode(&req); err != nil || req.PolicyID == "" || req.PolicyVersion == "" {
			return nil, bad("the body must be {\"policy_id\": ..., \"policy_version\": ...} naming a recorded policy bundle")
		}
		rec, err := a.opts.Store.PolicyBundle(r.Context(), req.PolicyID, req.PolicyVersion)
		if err != nil {
			return nil, err
		}
		return policy.BundleFromRecord(rec)
	}
	return nil, bad("Content-Type must be application/gzip (an OPA bundle archive) or application/json (a recorded version)")
}

// filter reads the run's filter from the query, narrowed to the
// principal's scope; in incident mode (request_id) the decision's agent
// and a window around it.
func (a *API) filter(r *http.Request, p *access.Principal) (ledger.StepFilter, int64, *ledger.StepRef, error) {
	q := r.URL.Query()
	f := ledger.StepFilter{
		SessionID: q.Get("session_id"), AgentPrefix: q.Get("agent"), ToolName: q.Get("tool"),
		Disposition: q.Get("decision"), Source: q.Get("source"),
	}
	for name, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			var err error
			if *t, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return f, 0, nil, bad("%s %q is not an RFC 3339 time", name, v)
			}
		}
	}
	var limit int64
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, 0, nil, bad("limit %q is not a count", v)
		}
		limit = n
	}
	var focus *ledger.StepRef
	if id := q.Get("request_id"); id != "" {
		window := DefaultWindow
		if v := q.Get("window"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > 30*24*time.Hour {
				return f, 0, nil, bad("window %q is not a duration between 0 and 720h", v)
			}
			window = d
		}
		e, err := replay.FindEntry(r.Context(), a.opts.Store, id, q.Get("session_id"))
		if err != nil {
			return f, 0, nil, err
		}
		s, err := a.opts.Store.Session(r.Context(), e.SessionID)
		if err != nil {
			return f, 0, nil, err
		}
		if p != nil && !p.Sees(s.AgentID) {
			return f, 0, nil, fmt.Errorf("step %s: %w", id, ledger.ErrNotFound)
		}
		f.SessionID, f.AgentID = "", s.AgentID
		f.Since, f.Until = e.RecordedAt.Add(-window), e.RecordedAt.Add(window)
		focus = &ledger.StepRef{SessionID: e.SessionID, Position: e.Position}
	}
	if p != nil && p.Scope != "" {
		switch {
		case f.AgentPrefix == "" || strings.HasPrefix(p.Scope, f.AgentPrefix):
			f.AgentPrefix = p.Scope
		case !strings.HasPrefix(f.AgentPrefix, p.Scope):
			return f, 0, nil, httpapi.NewError(http.StatusForbidden, "agent is outside this token's scope")
		}
	}
	return f, limit, focus, nil
}

func filterJSON(f ledger.StepFilter, limit int64) FilterJSON {
	j := FilterJSON{SessionID: f.SessionID, AgentID: f.AgentID, AgentPrefix: f.AgentPrefix, Tool: f.ToolName,
		Decision: f.Disposition, Source: f.Source, Limit: limit}
	if !f.Since.IsZero() {
		t := f.Since.UTC()
		j.Since = &t
	}
	if !f.Until.IsZero() {
		t := f.Until.UTC()
		j.Until = &t
	}
	return j
}
