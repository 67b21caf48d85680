// Package access is the access control of acsledger's HTTP server
// (docs/security.md): who a request comes from (API tokens, the UI's
// login sessions), what its role and scope let it reach (one guard in
// front of the whole router, driven by an access table), how fast it may
// ask (rate limits), and the access log that records every read of
// evidence in the ledger itself.
package access

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/httpapi"
)

// One guard sits in front of the whole router: it finds the route a
// request will reach, looks its row up in the access table, and only then
// lets the request through. A route without a row is refused, so a route
// added without deciding who may use it fails closed (and TestAccessTable
// fails).

// Tokens is the token storage access control needs: lookups for every
// request, the rest for the admin token routes. ledger/pgstore and
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

// SessionReader reads a session: its agent is what a token's scope is
// checked against. Session returns ledger.ErrNotFound for an unknown one.
type SessionReader interface {
	Session(ctx context.Context, sessionID string) (ledger.Session, error)
}

// Store is what access control reads and writes of the ledger: sessions,
// for the scope check, and appends to the access log (ledger.Store
// documents both).
type Store interface {
	SessionReader
	Append(ctx context.Context, r ledger.Record) (ledger.Appended, error)
}

// Options configure access control. The zero value accepts no credential
// at all: every non-public route answers 401.
type Options struct {
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

// Sees reports whether p may see a session of agentID: within its scope,
// and the access log only for unscoped admins and auditors.
func (p *Principal) Sees(agentID string) bool {
	if Reserved(agentID) {
		return (p.Role == RoleAdmin || p.Role == RoleAuditor) && p.Scope == ""
	}
	return strings.HasPrefix(agentID, p.Scope)
}

type principalKey struct{}

// PrincipalFrom returns the request's principal; nil on public routes.
func PrincipalFrom(ctx context.Context) *Principal {
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

func (f *authFailure) Error() string   { return f.msg }
func (f *authFailure) HTTPStatus() int { return f.status }

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
	httpapi.RefuseUnread(w, r)
	code := httpapi.StatusFor(f)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="acsledger", error="invalid_token"`)
	}
	httpapi.WriteJSON(w, code, authErrorBody{Error: f.msg, Credential: f.reason})
}

// RefuseRole answers a request whose role may not have what it asked for,
// as the guard answers a route the role may not use.
func RefuseRole(w http.ResponseWriter, r *http.Request, role Role) { refuse(w, r, failRole(role)) }

// Control is the state of access control: the token store, UI sessions,
// rate limiters and ACS session bindings, and the store the scope check
// reads and the access log appends to.
type Control struct {
	opts      Options
	bootstrap [32]byte
	hasBoot   bool
	sessions  *uiSessions
	perAddr   *limiter
	perCred   *limiter
	failures  *limiter
	// acsBound binds ACS sessions to tokens (Options.ACSRequireToken).
	acsBound *acsBindings

	store   Store
	writes  SessionReader
	log     *slog.Logger
	maxBody int64
}

// New returns access control over store: the scope check reads sessions
// from it, or from writes in front of a write (a read replica may not
// have replayed a session the primary has), and the access log appends
// to it. maxBody caps the body of a route whose row sets no cap.
func New(store Store, writes SessionReader, opts Options, log *slog.Logger, maxBody int64) *Control {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	rl := opts.RateLimits.withDefaults()
	c := &Control{
		opts:     opts,
		sessions: newUISessions(),
		perAddr:  newLimiter(rl.PerAddress, 2*rl.PerAddress, opts.Now),
		perCred:  newLimiter(rl.PerCredential, 2*rl.PerCredential, opts.Now),
		failures: newLimiter(rl.FailuresPerMinute/60, rl.FailureBurst, opts.Now),
		acsBound: newACSBindings(),
		store:    store,
		writes:   writes,
		log:      log,
		maxBody:  maxBody,
	}
	if opts.Bootstrap != "" {
		c.bootstrap, c.hasBoot = HashToken(opts.Bootstrap), true
	}
	return c
}

// Now is the clock access control runs on (Options.Now).
func (c *Control) Now() time.Time { return c.opts.Now() }

func (c *Control) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Fail(c.log, w, r, err)
}

// check resolves a presented token. Only its hash is compared, in
// constant time for the bootstrap token; stored tokens are found by hash.
func (c *Control) check(ctx context.Context, token string) (*Principal, error) {
	h := HashToken(token)
	if c.hasBoot && subtle.ConstantTimeCompare(h[:], c.bootstrap[:]) == 1 {
		return &Principal{Name: BootstrapName, Role: RoleAdmin, hash: h}, nil
	}
	if !wellFormed(token) {
		return nil, failMalformed
	}
	return c.resolve(ctx, h, failUnknown)
}

// resolve finds the stored token whose hash is h and checks that it is
// still good; a hash no token has is refused with unknown.
func (c *Control) resolve(ctx context.Context, h [32]byte, unknown *authFailure) (*Principal, error) {
	if c.opts.Tokens == nil {
		return nil, unknown
	}
	t, err := c.opts.Tokens.TokenByHash(ctx, h)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, unknown
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't look up a token: %w", err)
	}
	if subtle.ConstantTimeCompare(t.Hash[:], h[:]) != 1 || !ValidRole(t.Role) {
		return nil, unknown
	}
	switch now := c.opts.Now(); {
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
func (c *Control) authenticate(r *http.Request) (*Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			return nil, failMalformed
		}
		return c.check(r.Context(), tok)
	}
	cookie, err := r.Cookie(sessionCookie)
	if err != nil || cookie.Value == "" {
		return nil, failMissing
	}
	s := c.sessions.get(cookie.Value, c.opts.Now())
	if s == nil {
		return nil, failSession
	}
	// The token behind the session is checked again on every request, so
	// revoking it ends the UI sessions it opened.
	p, err := c.recheck(r.Context(), s)
	if err != nil {
		return nil, err
	}
	p.ui = s
	return p, nil
}

// recheck resolves the token a UI session was opened with, by its hash.
func (c *Control) recheck(ctx context.Context, s *uiSession) (*Principal, error) {
	if s.principal.Name == BootstrapName && c.hasBoot && subtle.ConstantTimeCompare(s.principal.hash[:], c.bootstrap[:]) == 1 {
		p := s.principal
		return &p, nil
	}
	return c.resolve(ctx, s.principal.hash, failSession)
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
	httpapi.RefuseUnread(w, r)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	httpapi.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("too many requests: retry after %d s", secs))
}

// Guard is the access control middleware of the whole router mux: every
// route it answers must have a row in table.
func (c *Control) Guard(mux *chi.Mux, table []Route) func(http.Handler) http.Handler {
	rules := make(map[string]Route, len(table))
	for _, rt := range table {
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
				c.log.Error("route without an access rule refused", "method", r.Method, "pattern", pattern)
				httpapi.WriteError(w, http.StatusForbidden, "this route has no access rule")
				return
			}
			limit := rule.MaxBody
			if limit <= 0 {
				limit = c.maxBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			acs := c.opts.ACSRequireToken && strings.HasPrefix(pattern, "/acs")
			if acs {
				rule.Public, rule.Roles = false, acsRoles
			}
			if rule.Public {
				next.ServeHTTP(w, r)
				return
			}
			p, ok := c.admit(w, r, rule)
			if !ok {
				return
			}
			if acs && pattern == "/acs" {
				if f := c.checkACS(r, p); f != nil {
					refuse(w, r, f)
					return
				}
			}
			ctx := context.WithValue(r.Context(), principalKey{}, p)
			r = r.WithContext(ctx)
			sessionID := httpapi.RouteParam(rctx, "session_id")
			record := func() error {
				return c.recordAccess(ctx, p, r, pattern, sessionID, httpapi.RouteParam(rctx, "request_id"))
			}
			// A read of the access log itself is recorded once served:
			// recorded first, its own record would be the newest entry of
			// what it reads, not yet anchored in the Merkle log.
			recordAfter := rule.Recorded && !c.opts.NoAccessLog && strings.HasPrefix(sessionID, LogAgentID+"-")
			if rule.Recorded && !c.opts.NoAccessLog && !recordAfter {
				if err := record(); err != nil {
					// No read goes unrecorded: without its record it is
					// refused.
					c.log.Error("couldn't record an access", "who", p.Name, "pattern", pattern, "err", err)
					httpapi.WriteError(w, http.StatusServiceUnavailable, "the access log could not be written; try again")
					return
				}
			}
			if sessionID != "" && !strings.HasPrefix(pattern, "/ui/") {
				write := r.Method == http.MethodPost
				read := SessionReader(c.store)
				if write {
					read = c.writes
				}
				if err := CheckSession(ctx, read, p, sessionID, write); err != nil {
					c.fail(w, r, err)
					return
				}
			}
			next.ServeHTTP(w, r)
			if recordAfter {
				if err := record(); err != nil {
					c.log.Error("couldn't record an access", "who", p.Name, "pattern", pattern, "err", err)
				}
			}
		})
	}
}

// MountLogin adds the UI's login and logout to r, the root router.
func (c *Control) MountLogin(r chi.Router) {
	r.Post("/ui/login", c.login)
	r.Post("/ui/logout", c.logout)
}

// MountAPI adds the caller's own credential (whoami) and the admin token
// routes to r, the /api/v1 router.
func (c *Control) MountAPI(r chi.Router) {
	r.Get("/whoami", c.whoami)
	r.Get("/admin/tokens", c.withTokens(c.listTokens))
	r.Post("/admin/tokens", c.withTokens(c.createToken))
	r.Post("/admin/tokens/{name}/revoke", c.withTokens(c.revokeToken))
}

// admit authenticates and authorizes a request for a non-public route,
// answering it when refused.
func (c *Control) admit(w http.ResponseWriter, r *http.Request, rule Route) (*Principal, bool) {
	addr := remoteHost(r)
	// A blocked address is refused before its credential is looked at:
	// guessing tokens costs one failure per attempt, and failures run out.
	if ok, retry := c.failures.peek(addr); !ok {
		tooMany(w, r, retry)
		return nil, false
	}
	if ok, retry := c.perAddr.take(addr); !ok {
		tooMany(w, r, retry)
		return nil, false
	}
	p, err := c.authenticate(r)
	if err != nil {
		var f *authFailure
		if !errors.As(err, &f) {
			c.fail(w, r, err)
			return nil, false
		}
		c.failures.take(addr)
		if r.Method == http.MethodGet && strings.HasPrefix(rule.Pattern, "/ui/") && (f == failMissing || f == failSession) {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return nil, false
		}
		refuse(w, r, f)
		return nil, false
	}
	if ok, retry := c.perCred.take("token:" + p.Name); !ok {
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

// CheckSession answers whether p may reach the session, read from read.
// A session out of its scope (or the access log, for roles that may not
// read it) and an unknown one get the same 404, so that a session's
// existence does not leak. An append (write) to an unknown session
// passes: it creates the session, within the token's scope (the append
// route checks the agent id).
func CheckSession(ctx context.Context, read SessionReader, p *Principal, sessionID string, write bool) error {
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
	if !p.Sees(sess.AgentID) || (write && Reserved(sess.AgentID)) {
		return fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound)
	}
	return nil
}

// Errors of appends through the API; httpapi.StatusFor answers them 403.
var (
	// ErrOutOfScope refuses a write that would create a session outside
	// the token's scope.
	ErrOutOfScope = httpapi.NewError(http.StatusForbidden, "the agent_id is outside this token's scope")
	// ErrAgentRequired refuses a scoped token's append that would create
	// a session naming no agent, which no scope covers.
	ErrAgentRequired = httpapi.NewError(http.StatusForbidden, "a token with a scope names the agent_id of a session it creates")
	// ErrReserved refuses an append to the access log's sessions and to
	// the admin sessions of retention (ledger/retention).
	ErrReserved = httpapi.NewError(http.StatusForbidden, "session ids starting with "+LogAgentID+"- or "+adminAgentID+"- and the agent ids "+LogAgentID+" and "+adminAgentID+" are the server's own")
)
