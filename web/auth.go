package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/ledger"
)

// Access control (docs/security.md). One guard sits in front of the whole
// router: it finds the route a request will reach, looks its row up in
// AccessTable, and only then lets the request through. A route without a
// row is refused, so a route added without deciding who may use it fails
// closed (and TestAccessTable fails).

// Tokens is the token storage the server needs: lookups for every request,
// the rest for the admin token routes. ledger/pgstore and
// ledger/sqlitestore implement it (ledger.TokenStore documents the
// contract): TokenByHash returns ledger.ErrNotFound for an unknown hash,
// CreateToken ledger.ErrTokenExists for a taken name, RevokeToken
// ledger.ErrNotFound for an unknown name.
type Tokens interface {
	TokenByHash(ctx context.Context, hash [32]byte) (ledger.Token, error)
	CreateToken(ctx context.Context, t ledger.Token) error
	Tokens(ctx context.Context) ([]ledger.Token, error)
	RevokeToken(ctx context.Context, name string, at time.Time) error
}

// AuthOptions configure access control. The zero value accepts no
// credential at all: every non-public route answers 401.
type AuthOptions struct {
	// Tokens holds the API tokens; nil accepts Bootstrap only.
	Tokens Tokens
	// Bootstrap is an admin token accepted beside the stored ones
	// ($ACSLEDGER_ADMIN_TOKEN), for automation that provisions a server
	// before any token is stored. Empty for none.
	Bootstrap string
	// SessionTTL is how long a UI login lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// RateLimits bound requests per address and per credential.
	RateLimits RateLimits
	// ACSRequireToken makes POST /acs and POST /acs/approvals need a
	// writer's token beside their signatures, and binds each session to
	// the token that opened it (acsbind.go).
	ACSRequireToken bool
	// NoAccessLog stops recording evidence reads. serve never sets it; it
	// exists for tests that count the sessions of a ledger, which the
	// access log's own sessions would change.
	NoAccessLog bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultSessionTTL is how long a UI login lasts by default.
const DefaultSessionTTL = 8 * time.Hour

// BootstrapName is the name the access log gives the bootstrap token.
const BootstrapName = "bootstrap"

// Principal is who a request comes from: a token's name, role and scope.
type Principal struct {
	Name string
	Role Role
	// Scope, when not empty, limits the principal to sessions whose agent
	// id starts with it.
	Scope string

	hash [32]byte   // the token's SHA-256, to re-check a UI session's token
	ui   *uiSession // set when the credential is the UI session cookie
}

// sees reports whether p may see a session of agentID: within its scope,
// and the access log only for unscoped admins and auditors.
func (p *Principal) sees(agentID string) bool {
	if agentID == AccessAgentID {
		return (p.Role == RoleAdmin || p.Role == RoleAuditor) && p.Scope == ""
	}
	return strings.HasPrefix(agentID, p.Scope)
}

type principalKey struct{}

// principalFrom returns the request's principal; nil on public routes.
func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// authFailure is why a credential was refused: the status, a reason code
// clients can test ("missing", "malformed", "unknown", "expired",
// "revoked", "wrong_role", "csrf") and one sentence. None says anything
// about the resource asked for.
type authFailure struct {
	status int
	reason string
	msg    string
}

func (f *authFailure) Error() string { return f.msg }

var (
	failMissing   = &authFailure{http.StatusUnauthorized, "missing", "this route needs a credential: send Authorization: Bearer <token>, or log in at /ui/login"}
	failMalformed = &authFailure{http.StatusUnauthorized, "malformed", "the credential is malformed: want Authorization: Bearer acsl_<43 characters>"}
	failUnknown   = &authFailure{http.StatusUnauthorized, "unknown", "the token is not known to this server"}
	failExpired   = &authFailure{http.StatusUnauthorized, "expired", "the token has expired"}
	failRevoked   = &authFailure{http.StatusUnauthorized, "revoked", "the token has been revoked"}
	failSession   = &authFailure{http.StatusUnauthorized, "expired", "the UI session has ended; log in again at /ui/login"}
	failCSRF      = &authFailure{http.StatusForbidden, "csrf", "a change made with the UI session cookie must carry the session's CSRF token (X-CSRF-Token)"}
	failOrigin    = &authFailure{http.StatusForbidden, "csrf", "the request comes from another origin"}
)

func failRole(role Role) *authFailure {
	return &authFailure{http.StatusForbidden, "wrong_role", fmt.Sprintf("the role %s may not use this route", role)}
}

// authErrorBody is the JSON of a refused credential.
type authErrorBody struct {
	Error      string `json:"error"`
	Credential string `json:"credential"`
}

// refuse answers a refused credential and counts it.
func refuse(w http.ResponseWriter, r *http.Request, f *authFailure) {
	authRefusals.Add(r.Context(), 1, metric.WithAttributes(attrReason.String(f.reason)))
	refuseUnread(w, r)
	code := statusFor(f)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acsledger", error="invalid_token"`)
	}
	writeJSON(w, code, authErrorBody{Error: f.msg, Credential: f.reason})
}

// auth holds the state of access control: the token store, UI sessions
// and rate limiters.
type auth struct {
	opts      AuthOptions
	bootstrap [32]byte
	hasBoot   bool
	sessions  *uiSessions
	perAddr   *limiter
	perCred   *limiter
	failures  *limiter
}

func newAuth(opts AuthOptions) *auth {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	rl := opts.RateLimits.withDefaults()
	a := &auth{
		opts:     opts,
		sessions: newUISessions(),
		perAddr:  newLimiter(rl.PerAddress, 2*rl.PerAddress, opts.Now),
		perCred:  newLimiter(rl.PerCredential, 2*rl.PerCredential, opts.Now),
		failures: newLimiter(rl.FailuresPerMinute/60, rl.FailureBurst, opts.Now),
	}
	if opts.Bootstrap != "" {
		a.bootstrap, a.hasBoot = HashToken(opts.Bootstrap), true
	}
	return a
}

// check resolves a presented token. Only its hash is compared, in
// constant time for the bootstrap token; stored tokens are found by hash.
func (a *auth) check(ctx context.Context, token string) (*Principal, error) {
	h := HashToken(token)
	if a.hasBoot && subtle.ConstantTimeCompare(h[:], a.bootstrap[:]) == 1 {
		return &Principal{Name: BootstrapName, Role: RoleAdmin, hash: h}, nil
	}
	if !wellFormed(token) {
		return nil, failMalformed
	}
	return a.resolve(ctx, h, failUnknown)
}

// resolve finds the stored token whose hash is h and checks that it is
// still good; a hash no token has is refused with unknown.
func (a *auth) resolve(ctx context.Context, h [32]byte, unknown *authFailure) (*Principal, error) {
	if a.opts.Tokens == nil {
		return nil, unknown
	}
	t, err := a.opts.Tokens.TokenByHash(ctx, h)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, unknown
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't look up a token: %w", err)
	}
	if subtle.ConstantTimeCompare(t.Hash[:], h[:]) != 1 || !ValidRole(t.Role) {
		return nil, unknown
	}
	switch now := a.opts.Now(); {
	case !t.RevokedAt.IsZero():
		return nil, failRevoked
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return nil, failExpired
	}
	return &Principal{Name: t.Name, Role: Role(t.Role), Scope: t.Scope, hash: h}, nil
}

// authenticate finds the request's credential: a bearer token, else the
// UI session cookie. Tokens travel in the Authorization header only,
// never in URLs.
func (a *auth) authenticate(r *http.Request) (*Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			return nil, failMalformed
		}
		return a.check(r.Context(), tok)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, failMissing
	}
	s := a.sessions.get(c.Value, a.opts.Now())
	if s == nil {
		return nil, failSession
	}
	// The token behind the session is checked again on every request, so
	// revoking it ends the UI sessions it opened.
	p, err := a.recheck(r.Context(), s)
	if err != nil {
		return nil, err
	}
	p.ui = s
	return p, nil
}

// recheck resolves the token a UI session was opened with, by its hash.
func (a *auth) recheck(ctx context.Context, s *uiSession) (*Principal, error) {
	if s.principal.Name == BootstrapName && a.hasBoot && subtle.ConstantTimeCompare(s.principal.hash[:], a.bootstrap[:]) == 1 {
		p := s.principal
		return &p, nil
	}
	return a.resolve(ctx, s.principal.hash, failSession)
}

// remoteHost is the address a request came from, without its port. A
// reverse proxy in front makes every request come from the proxy; rate
// limits then apply to it as a whole (docs/security.md).
func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// routePath is the path chi routes on: the escaped one when it differs.
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	if r.URL.Path == "" {
		return "/"
	}
	return r.URL.Path
}

func tooMany(w http.ResponseWriter, r *http.Request, retry time.Duration) {
	authRefusals.Add(r.Context(), 1, metric.WithAttributes(attrReason.String(reasonRateLimited)))
	secs := int(retry.Seconds() + 0.999)
	if secs < 1 {
		secs = 1
	}
	refuseUnread(w, r)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many requests: retry after %d s", secs))
}

// guard is the access control middleware of the whole router.
func (s *Server) guard(mux *chi.Mux) func(http.Handler) http.Handler {
	rules := make(map[string]Route, len(AccessTable))
	for _, rt := range AccessTable {
		rules[rt.Method+" "+rt.Pattern] = rt
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.NewRouteContext()
			pattern := mux.Find(rctx, r.Method, routePath(r))
			if pattern == "" {
				// No route: the router answers 404 or 405, which says
				// nothing a route table would hide.
				next.ServeHTTP(w, r)
				return
			}
			rule, ok := rules[r.Method+" "+pattern]
			if !ok {
				s.log.Error("route without an access rule refused", "method", r.Method, "pattern", pattern)
				writeError(w, http.StatusForbidden, "this route has no access rule")
				return
			}
			limit := rule.MaxBody
			if limit <= 0 {
				limit = s.maxBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			acs := s.auth.opts.ACSRequireToken && strings.HasPrefix(pattern, "/acs")
			if acs {
				rule.Public, rule.Roles = false, acsRoles
			}
			if rule.Public {
				next.ServeHTTP(w, r)
				return
			}
			p, ok := s.admit(w, r, rule)
			if !ok {
				return
			}
			if acs && pattern == "/acs" {
				if f := s.checkACS(r, p); f != nil {
					refuse(w, r, f)
					return
				}
			}
			ctx := context.WithValue(r.Context(), principalKey{}, p)
			r = r.WithContext(ctx)
			sessionID := param(rctx, "session_id")
			record := func() error {
				return s.recordAccess(ctx, p, r, pattern, sessionID, param(rctx, "request_id"))
			}
			// A read of the access log itself is recorded once served:
			// recorded first, its own record would be the newest entry of
			// what it reads, not yet anchored in the Merkle log.
			recordAfter := rule.Recorded && !s.auth.opts.NoAccessLog && strings.HasPrefix(sessionID, AccessAgentID+"-")
			if rule.Recorded && !s.auth.opts.NoAccessLog && !recordAfter {
				if err := record(); err != nil {
					// No read goes unrecorded: without its record it is
					// refused.
					s.log.Error("couldn't record an access", "who", p.Name, "pattern", pattern, "err", err)
					writeError(w, http.StatusServiceUnavailable, "the access log could not be written; try again")
					return
				}
			}
			if sessionID != "" && !strings.HasPrefix(pattern, "/ui/") {
				if err := s.checkSession(ctx, p, sessionID, r.Method == http.MethodPost); err != nil {
					s.fail(w, r, err)
					return
				}
			}
			next.ServeHTTP(w, r)
			if recordAfter {
				if err := record(); err != nil {
					s.log.Error("couldn't record an access", "who", p.Name, "pattern", pattern, "err", err)
				}
			}
		})
	}
}

// admit authenticates and authorizes a request for a non-public route,
// answering it when refused.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rule Route) (*Principal, bool) {
	addr := remoteHost(r)
	// A blocked address is refused before its credential is looked at:
	// guessing tokens costs one failure per attempt, and failures run out.
	if ok, retry := s.auth.failures.peek(addr); !ok {
		tooMany(w, r, retry)
		return nil, false
	}
	if ok, retry := s.auth.perAddr.take(addr); !ok {
		tooMany(w, r, retry)
		return nil, false
	}
	p, err := s.auth.authenticate(r)
	if err != nil {
		var f *authFailure
		if !errors.As(err, &f) {
			s.fail(w, r, err)
			return nil, false
		}
		s.auth.failures.take(addr)
		if r.Method == http.MethodGet && strings.HasPrefix(rule.Pattern, "/ui/") && (f == failMissing || f == failSession) {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil, false
		}
		refuse(w, r, f)
		return nil, false
	}
	if ok, retry := s.auth.perCred.take("token:" + p.Name); !ok {
		tooMany(w, r, retry)
		return nil, false
	}
	if !rule.Allows(p.Role) {
		refuse(w, r, failRole(p.Role))
		return nil, false
	}
	if p.ui != nil && !safeMethod(r.Method) {
		if f := checkCSRF(r, p.ui); f != nil {
			refuse(w, r, f)
			return nil, false
		}
	}
	return p, true
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// param returns a route parameter decoded as pathParam does.
func param(rctx *chi.Context, name string) string {
	v := rctx.URLParam(name)
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// checkSession answers whether p may reach the session. A session out of
// its scope (or the access log, for roles that may not read it) and an
// unknown one get the same 404, so that a session's existence does not
// leak. An append to an unknown session passes: it creates the session,
// within the token's scope (appendEntry checks the agent id).
func (s *Server) checkSession(ctx context.Context, p *Principal, sessionID string, write bool) error {
	read := s.store
	if write {
		read = s.writes
	}
	sess, err := read.Session(ctx, sessionID)
	if errors.Is(err, ledger.ErrNotFound) {
		if write {
			return nil
		}
		return fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if !p.sees(sess.AgentID) || (write && sess.AgentID == AccessAgentID) {
		return fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound)
	}
	return nil
}

// Errors of appends through the API; statusFor maps them.
var (
	// errOutOfScope refuses a write that would create a session outside
	// the token's scope.
	errOutOfScope = errors.New("the agent_id is outside this token's scope")
	// errAgentRequired refuses a scoped token's append that would create
	// a session naming no agent, which no scope covers.
	errAgentRequired = errors.New("a token with a scope names the agent_id of a session it creates")
	// errReserved refuses an append to the access log's sessions.
	errReserved = errors.New("session ids starting with " + AccessAgentID + "- and the agent id " + AccessAgentID + " are the access log's")
)

// scoped is the store as p sees it: sessions out of its scope answer as
// unknown ones do. Decision lookups and replay go through it, because
// they find their session from a request id.
type scoped struct {
	ledger.GuardianStore
	p *Principal
}

func (sc scoped) Session(ctx context.Context, id string) (ledger.Session, error) {
	sess, err := sc.GuardianStore.Session(ctx, id)
	if err == nil && !sc.p.sees(sess.AgentID) {
		return ledger.Session{}, fmt.Errorf("session %q: %w", id, ledger.ErrNotFound)
	}
	return sess, err
}

func (sc scoped) EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error) {
	es, err := sc.GuardianStore.EntriesByStep(ctx, stepID, sessionID)
	if err != nil {
		return nil, err
	}
	out := es[:0:0]
	for _, e := range es {
		sess, err := sc.GuardianStore.Session(ctx, e.SessionID)
		if err != nil {
			return nil, err
		}
		if sc.p.sees(sess.AgentID) {
			out = append(out, e)
		}
	}
	return out, nil
}

// scopedFor is gs as the request's principal sees it.
func scopedFor(r *http.Request, gs ledger.GuardianStore) ledger.GuardianStore {
	p := principalFrom(r.Context())
	if p == nil {
		return gs
	}
	return scoped{GuardianStore: gs, p: p}
}
