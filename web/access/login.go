package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/web/httpapi"
)

// The UI logs in with a token once and then carries a session cookie: an
// opaque random id (never the token), HttpOnly, SameSite=Strict, Secure
// under TLS, ending after Options.SessionTTL or at logout. Every
// state-changing request made with the cookie must carry the session's
// CSRF token, which only the UI's own scripts can read (GET
// /api/v1/whoami).

const sessionCookie = "acsledger_session"

// csrfHeader carries the CSRF token on the UI's API calls; forms send it
// as the field csrf.
const csrfHeader = "X-CSRF-Token"

// uiSession is one UI login.
type uiSession struct {
	principal Principal // as at login; re-checked on every request
	csrf      string
	expires   time.Time
}

// uiSessions are the open UI logins, keyed by the SHA-256 of the cookie
// value. They live in memory: a restart logs everyone out.
type uiSessions struct {
	mu sync.Mutex
	m  map[[32]byte]*uiSession
}

func newUISessions() *uiSessions { return &uiSessions{m: make(map[[32]byte]*uiSession)} }

func randomString() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never returns an error
	return base64.RawURLEncoding.EncodeToString(b)
}

// open starts a session for p and returns the cookie value.
func (u *uiSessions) open(p Principal, now time.Time, ttl time.Duration) (string, *uiSession) {
	id := randomString()
	s := &uiSession{principal: p, csrf: randomString(), expires: now.Add(ttl)}
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, old := range u.m {
		if !now.Before(old.expires) {
			delete(u.m, k)
		}
	}
	u.m[sha256.Sum256([]byte(id))] = s
	return id, s
}

func (u *uiSessions) get(id string, now time.Time) *uiSession {
	k := sha256.Sum256([]byte(id))
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.m[k]
	if s == nil {
		return nil
	}
	if !now.Before(s.expires) {
		delete(u.m, k)
		return nil
	}
	return s
}

func (u *uiSessions) close(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, sha256.Sum256([]byte(id)))
}

// checkCSRF checks the CSRF token of a state-changing request made with
// the session cookie: in the X-CSRF-Token header, or the csrf field of a
// form. A request from another origin is refused whatever it carries.
func checkCSRF(r *http.Request, s *uiSession) *authFailure {
	if !sameOrigin(r) {
		return failOrigin
	}
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue("csrf")
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return failCSRF
	}
	return nil
}

// sameOrigin reports whether the request's Origin header, when it names
// an origin, names this server. The UI's pages send no referrer, so their
// form posts say "null": they are told apart by the CSRF token (and the
// SameSite=Strict cookie), not by this check.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// login checks the token posted by the login form and opens a UI
// session. A refused token goes back to the form with the reason only.
func (c *Control) login(w http.ResponseWriter, r *http.Request) {
	addr := remoteHost(r)
	if ok, retry := c.failures.peek(addr); !ok {
		tooMany(w, r, retry)
		return
	}
	if !sameOrigin(r) {
		refuse(w, r, failOrigin)
		return
	}
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		next = "/ui/"
	}
	p, err := c.check(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		var f *authFailure
		if !errors.As(err, &f) {
			c.fail(w, r, err)
			return
		}
		c.failures.take(addr)
		authRefusals.Add(r.Context(), 1, metric.WithAttributes(attrReason.String(f.reason)))
		http.Redirect(w, r, "/ui/login?error="+url.QueryEscape(f.reason)+"&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	ttl := c.opts.SessionTTL
	id, _ := c.sessions.open(*p, c.opts.Now(), ttl)
	setSessionCookie(w, r, id, int(ttl.Seconds()))
	c.log.Info("ui login", "who", p.Name, "role", p.Role, "from", addr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the UI session (the guard has checked its CSRF token).
func (c *Control) logout(w http.ResponseWriter, r *http.Request) {
	if cookie, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.close(cookie.Value)
	}
	setSessionCookie(w, r, "", -1)
	http.Redirect(w, r, "/ui/login?error=logged_out", http.StatusSeeOther)
}

// whoamiJSON describes the caller's credential; csrf_token only for the UI
// session cookie.
type whoamiJSON struct {
	Name      string `json:"name"`
	Role      Role   `json:"role"`
	Scope     string `json:"scope,omitempty"`
	CSRFToken string `json:"csrf_token,omitempty"`
}

func (c *Control) whoami(w http.ResponseWriter, r *http.Request) {
	p := PrincipalFrom(r.Context())
	out := whoamiJSON{Name: p.Name, Role: p.Role, Scope: p.Scope}
	if p.ui != nil {
		out.CSRFToken = p.ui.csrf
	}
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, out)
}
