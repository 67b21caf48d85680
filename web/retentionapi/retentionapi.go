// Package retentionapi serves the admin routes of retention, legal holds
// and erasure requests (docs/api.md, docs/retention.md) over
// ledger/retention. Access control (web/access) admits admins only; the
// routes record who acted from the request's principal.
package retentionapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Reader is what the routes read: the rules, the holds and the
// dashboard's status.
type Reader interface {
	Rules(ctx context.Context) ([]ledger.Rule, error)
	Holds(ctx context.Context, all bool) ([]ledger.Hold, error)
	RetentionStatus(ctx context.Context) (ledger.RetentionStatus, error)
}

// Options configure the routes; without Reader and Admin they answer 501.
type Options struct {
	Reader Reader
	// Admin changes rules and holds (the service's own store).
	Admin *retention.Service
	// Eraser runs sweeps and erasure requests: a service over a store
	// that may erase (docs/retention.md, "Who may erase"); nil answers
	// those routes 503.
	Eraser *retention.Service
	// NextSweep reports when the server's sweeper runs next (zero when it
	// does not run).
	NextSweep func() time.Time
}

// MaxBody caps a request body of these routes (a hold lists at most
// ledger.MaxHoldSessions sessions).
const MaxBody = 1 << 20

// API serves the routes.
type API struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	running string // the kind of the run in progress, "" when none
}

// New returns the routes of opts.
func New(opts Options, log *slog.Logger) *API { return &API{opts: opts, log: log} }

var (
	errOff      = httpapi.NewError(http.StatusNotImplemented, "this server keeps no retention rules")
	errNoEraser = httpapi.NewError(http.StatusServiceUnavailable, "this server's database role cannot erase: start serve with --eraser-db (a role that is a member of acsledger_eraser) or run `acsledger retention sweep` / `acsledger erase --agent` with such a role")
	errRunning  = httpapi.NewError(http.StatusConflict, "a sweep or erasure request is running; try again when it has finished")
)

// Mount adds the routes under r (/api/v1).
func (a *API) Mount(r chi.Router) {
	r.Get("/admin/retention", a.answer(a.status))
	r.Get("/admin/retention/rules", a.answer(a.rules))
	r.Put("/admin/retention/rules/{name}", a.answer(a.setRule))
	r.Delete("/admin/retention/rules/{name}", a.answer(a.deleteRule))
	r.Post("/admin/retention/sweep", a.sweep)
	r.Get("/admin/holds", a.answer(a.holds))
	r.Post("/admin/holds", a.answer(a.setHold))
	r.Post("/admin/holds/{case}/release", a.answer(a.releaseHold))
	r.Post("/admin/erasures", a.erase)
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { httpapi.Fail(a.log, w, r, err) }

// answer serves a route that answers JSON at once: h returns the status
// and the body, or the error to answer instead.
func (a *API) answer(h func(w http.ResponseWriter, r *http.Request) (int, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.on(w, r) {
			return
		}
		code, body, err := h(w, r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		httpapi.WriteJSON(w, code, body)
	}
}

func (a *API) on(w http.ResponseWriter, r *http.Request) bool {
	if a.opts.Reader == nil || a.opts.Admin == nil {
		a.fail(w, r, errOff)
		return false
	}
	return true
}

// who is the name of the request's principal.
func who(r *http.Request) string {
	if p := access.PrincipalFrom(r.Context()); p != nil {
		return p.Name
	}
	return ""
}

// decode reads one JSON object into members, refusing a member not in
// known (naming it under where), duplicate members and trailing data.
func decode(r *http.Request, w http.ResponseWriter, where string, known ...string) (map[string]json.RawMessage, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return nil, fmt.Errorf("couldn't read the body: %w", err)
	}
	return members(body, where, known...)
}

func members(b []byte, where string, known ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, bad(where, "must be a JSON object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad(where, "malformed JSON: %v", err)
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, bad(join(where, k), "malformed JSON: %v", err)
		}
		if !slices.Contains(known, k) {
			return nil, bad(join(where, k), "unknown member (known: %s)", strings.Join(known, ", "))
		}
		if _, dup := m[k]; dup {
			return nil, bad(join(where, k), "duplicate member")
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(where, "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(where, "data after the JSON object")
	}
	return m, nil
}

func join(where, k string) string {
	if where == "" {
		return k
	}
	return where + "." + k
}

func bad(field, format string, args ...any) error {
	if field == "" {
		field = "body"
	}
	return &ledger.InvalidRetentionError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// str reads a string member ("" when absent).
func str(m map[string]json.RawMessage, where, k string) (string, error) {
	v, ok := m[k]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", bad(join(where, k), "must be a string")
	}
	return s, nil
}

func tm(m map[string]json.RawMessage, where, k string) (time.Time, error) {
	s, err := str(m, where, k)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, bad(join(where, k), "%q is not an RFC 3339 time", s)
	}
	return t.UTC(), nil
}

// StatusJSON is GET /admin/retention.
type StatusJSON struct {
	ErasedBySweeps   int64            `json:"erased_by_sweeps"`
	ErasedByRequests int64            `json:"erased_by_requests"`
	LastSweep        *time.Time       `json:"last_sweep"`
	NextSweep        *time.Time       `json:"next_sweep"`
	StandingHolds    int64            `json:"standing_holds"`
	NextExpiry       *time.Time       `json:"next_expiry"`
	Rules            []RuleStatusJSON `json:"rules"`
	Running          string           `json:"running,omitempty"`
}

// RuleStatusJSON is one rule and its next expiry.
type RuleStatusJSON struct {
	retention.RuleJSON
	NextExpiry *time.Time `json:"next_expiry"`
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (a *API) status(w http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := a.opts.Reader.RetentionStatus(r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := StatusJSON{ErasedBySweeps: st.ErasedBySweeps, ErasedByRequests: st.ErasedByRequests, LastSweep: opt(st.LastSweep),
		StandingHolds: st.StandingHolds, Rules: []RuleStatusJSON{}}
	if a.opts.NextSweep != nil {
		out.NextSweep = opt(a.opts.NextSweep())
	}
	for _, rs := range st.Rules {
		out.Rules = append(out.Rules, RuleStatusJSON{retention.NewRuleJSON(rs.Rule), opt(rs.NextExpiry)})
		if !rs.NextExpiry.IsZero() && (out.NextExpiry == nil || rs.NextExpiry.Before(*out.NextExpiry)) {
			out.NextExpiry = opt(rs.NextExpiry)
		}
	}
	a.mu.Lock()
	out.Running = a.running
	a.mu.Unlock()
	return http.StatusOK, out, nil
}

func (a *API) rules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	rs, err := a.opts.Reader.Rules(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, httpapi.List("rules", rs, retention.NewRuleJSON), nil
}

// setRule takes {"scope": {"agent_prefix", "source_format", "step_type"},
// "period": "180d", "reason"}.
func (a *API) setRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	rule, err := parseRule(r, w)
	if err != nil {
		return 0, nil, err
	}
	rule.Name, rule.SetBy = httpapi.PathParam(r, "name"), who(r)
	if rule, err = a.opts.Admin.SetRule(r.Context(), rule); err != nil {
		return 0, nil, err
	}
	a.log.Info("retention rule set", "name", rule.Name, "period", rule.Period, "by", rule.SetBy)
	return http.StatusOK, retention.NewRuleJSON(rule), nil
}

func parseRule(r *http.Request, w http.ResponseWriter) (ledger.Rule, error) {
	m, err := decode(r, w, "", "scope", "period", "reason")
	if err != nil {
		return ledger.Rule{}, err
	}
	var rule ledger.Rule
	if sc, ok := m["scope"]; ok {
		s, err := members(sc, "scope", "agent_prefix", "source_format", "step_type")
		if err != nil {
			return ledger.Rule{}, err
		}
		if rule.AgentPrefix, err = str(s, "scope", "agent_prefix"); err != nil {
			return ledger.Rule{}, err
		}
		if rule.SourceFormat, err = str(s, "scope", "source_format"); err != nil {
			return ledger.Rule{}, err
		}
		if rule.StepType, err = str(s, "scope", "step_type"); err != nil {
			return ledger.Rule{}, err
		}
	}
	p, err := str(m, "", "period")
	if err != nil {
		return ledger.Rule{}, err
	}
	if p == "" {
		return ledger.Rule{}, bad("period", "required (e.g. 180d, 6mo, 1y)")
	}
	if rule.Period, err = retention.ParsePeriod(p); err != nil {
		return ledger.Rule{}, err
	}
	rule.Reason, err = str(m, "", "reason")
	return rule, err
}

func (a *API) deleteRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	rule, err := a.opts.Admin.DeleteRule(r.Context(), httpapi.PathParam(r, "name"), who(r))
	if err != nil {
		return 0, nil, err
	}
	a.log.Info("retention rule deleted", "name", rule.Name, "by", who(r))
	return http.StatusOK, retention.NewRuleJSON(rule), nil
}

func (a *API) holds(w http.ResponseWriter, r *http.Request) (int, any, error) {
	all, err := httpapi.BoolParam(r, "all", false)
	if err != nil {
		return 0, nil, err
	}
	hs, err := a.opts.Reader.Holds(r.Context(), all)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, httpapi.List("holds", hs, retention.NewHoldJSON), nil
}

// setHold takes {"case", "scope": {"sessions", "agent_prefix", "from",
// "until"}, "reason"}.
func (a *API) setHold(w http.ResponseWriter, r *http.Request) (int, any, error) {
	h, err := parseHold(r, w)
	if err != nil {
		return 0, nil, err
	}
	h.SetBy = who(r)
	if h, err = a.opts.Admin.SetHold(r.Context(), h); err != nil {
		return 0, nil, err
	}
	a.log.Info("legal hold set", "case", h.Case, "by", h.SetBy)
	return http.StatusCreated, retention.NewHoldJSON(h), nil
}

func parseHold(r *http.Request, w http.ResponseWriter) (ledger.Hold, error) {
	m, err := decode(r, w, "", "case", "scope", "reason")
	if err != nil {
		return ledger.Hold{}, err
	}
	var h ledger.Hold
	if h.Case, err = str(m, "", "case"); err != nil {
		return h, err
	}
	if h.Reason, err = str(m, "", "reason"); err != nil {
		return h, err
	}
	sc, ok := m["scope"]
	if !ok {
		return h, bad("scope", "required: one or more of sessions, agent_prefix, from, until")
	}
	s, err := members(sc, "scope", "sessions", "agent_prefix", "from", "until")
	if err != nil {
		return h, err
	}
	if v, ok := s["sessions"]; ok {
		if err := json.Unmarshal(v, &h.Sessions); err != nil {
			return h, bad("scope.sessions", "must be an array of session ids")
		}
	}
	if h.AgentPrefix, err = str(s, "scope", "agent_prefix"); err != nil {
		return h, err
	}
	if h.From, err = tm(s, "scope", "from"); err != nil {
		return h, err
	}
	h.Until, err = tm(s, "scope", "until")
	return h, err
}

// releaseHold takes {"reason"}.
func (a *API) releaseHold(w http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := decode(r, w, "", "reason")
	if err != nil {
		return 0, nil, err
	}
	reason, err := str(m, "", "reason")
	if err != nil {
		return 0, nil, err
	}
	h, err := a.opts.Admin.ReleaseHold(r.Context(), httpapi.PathParam(r, "case"), who(r), reason)
	if err != nil {
		return 0, nil, err
	}
	a.log.Info("legal hold released", "case", h.Case, "by", h.ReleasedBy)
	return http.StatusOK, retention.NewHoldJSON(h), nil
}

// start runs fn in the background, one run at a time: a sweep over a
// large ledger outlasts any request, so the answer is 202 and the run's
// record lands in the admin session.
func (a *API) start(w http.ResponseWriter, r *http.Request, kind string, fn func(ctx context.Context) error) {
	a.mu.Lock()
	if a.running != "" {
		a.mu.Unlock()
		a.fail(w, r, errRunning)
		return
	}
	a.running = kind
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			a.running = ""
			a.mu.Unlock()
		}()
		if err := fn(context.WithoutCancel(r.Context())); err != nil {
			a.log.Error("retention run failed", "kind", kind, "err", err)
		}
	}()
	httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "started", "kind": kind,
		"record": "the run is recorded in the admin session " + retention.SessionID(time.Now()) + " when it ends"})
}

func (a *API) sweep(w http.ResponseWriter, r *http.Request) {
	if !a.on(w, r) {
		return
	}
	if a.opts.Eraser == nil {
		a.fail(w, r, errNoEraser)
		return
	}
	httpapi.RefuseUnread(w, r)
	a.start(w, r, "sweep", func(ctx context.Context) error {
		_, err := a.opts.Eraser.Sweep(ctx)
		return err
	})
}

// erase takes {"agent_prefix", "until", "reason"}: an erasure request by
// subject, checked before it starts.
func (a *API) erase(w http.ResponseWriter, r *http.Request) {
	if !a.on(w, r) {
		return
	}
	m, err := decode(r, w, "", "agent_prefix", "until", "reason")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var q retention.Request
	for _, f := range []struct {
		k   string
		out *string
	}{{"agent_prefix", &q.AgentPrefix}, {"until", &q.Until}, {"reason", &q.Reason}} {
		if *f.out, err = str(m, "", f.k); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	q.By = who(r)
	if err := retention.CheckRequest(q); err != nil {
		a.fail(w, r, err)
		return
	}
	if a.opts.Eraser == nil {
		a.fail(w, r, errNoEraser)
		return
	}
	a.start(w, r, "erasure request", func(ctx context.Context) error {
		_, err := a.opts.Eraser.Erase(ctx, q)
		return err
	})
}
