package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/ui"
)

// hostileSession and hostileStep are attacker-influenced strings: a
// session id and a step id (as a tool argument would be) carrying markup.
// The session id has no '/' so that it stays one path segment.
const (
	hostileSession = `sess-<img src=x onerror=alert(1)><script>alert(2)`
	hostileStep    = `<script>document.body.dataset.pwned='1'</script>`
)

// entry is a ContextEntry without its hashes; the ledger computes them.
func entry(n int, stepID, stepType, decision string) []byte {
	return fmt.Appendf(nil, `{"entry_id":"9e1f%04x-5c1d-4e2a-8b6f-00003a7c00d0","step_id":%q,"step_type":%q,`+
		`"timestamp":"2026-03-14T14:02:%02d.000Z","request_hash":"5b8b6336ec4634d5d69f3a2007aa6f483d1e23f1d68b2b29acad7ad024448b7e",`+
		`"decision":%q,"provenance_summary":{"entry_count":0,"origins_seen":[]}}`, n, stepID, stepType, n, decision)
}

// newServer serves the API and the UI over a fresh SQLite ledger holding
// two sessions: "alpha" (agent-7, three entries) and the hostile one.
func newServer(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	recs := []ledger.Record{
		{SessionID: "alpha", AgentID: "agent-7", Entry: entry(0, "req-0001", "steps/sessionStart", "ALLOW")},
		{SessionID: "alpha", Entry: entry(1, "req-0002", "steps/toolCallRequest", "DENY")},
		{SessionID: "alpha", Entry: entry(2, "req-0003", "steps/agentResponse", "ALLOW")},
		{SessionID: hostileSession, AgentID: "agent-9", Entry: entry(3, hostileStep, "steps/toolCallRequest", "ALLOW")},
	}
	for _, r := range recs {
		if _, err := store.Append(ctx, r); err != nil {
			t.Fatalf("append to %q: %v", r.SessionID, err)
		}
	}
	h := web.New(store, web.Options{Auth: web.AuthOptions{Bootstrap: adminToken, NoAccessLog: true}})
	ui.Mount(h.Router())
	srv := httptest.NewServer(asAdmin(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

// asAdmin sends every request on with the admin token, as a logged-in
// admin's browser would send its session: these tests are about what the
// pages show, and TestLogin about getting in.
func asAdmin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		h.ServeHTTP(w, r)
	})
}

func get(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	resp, b := webtest.Get(t, u)
	return resp.StatusCode, resp.Header, string(b)
}

func TestPagesAndAssets(t *testing.T) {
	base := newServer(t)
	for _, tc := range []struct {
		path, ctype string
		want        []string
	}{
		{"/ui/", "text/html", []string{`data-page="sessions"`, `<table id="sessions"`, `name="agent_id"`, `name="step_type"`, `name="since"`, `name="until"`, `src="/ui/static/app.js"`}},
		{"/ui/sessions/alpha", "text/html", []string{`data-page="session"`, `id="verdict"`, `id="bundle-link"`, `id="jsonl-link"`, `<table id="entries"`}},
		{"/ui/sessions/" + url.PathEscape(hostileSession), "text/html", []string{`data-page="session"`}},
		{"/ui/dashboard", "text/html", []string{`data-page="dashboard"`, `id="start"`, `<progress id="progress"`, `id="last"`}},
		{"/ui/login", "text/html", []string{`data-page="login"`, `<form id="login" method="post" action="/ui/login"`, `name="token" type="password"`}},
		{"/ui/decisions/req-0002", "text/html", []string{`data-page="decision"`, `id="step"`, `<table id="refs"`, `<select id="version">`, `id="replay-result"`}},
		{"/ui/decisions/" + url.PathEscape(hostileStep), "text/html", []string{`data-page="decision"`}},
		{"/ui/static/app.js", "text/javascript", []string{"textContent", "/sessions", "/verify", "format=jsonl", "/bundle", "/admin/reverify", "/policies", "/replay"}},
		{"/ui/static/style.css", "text/css", []string{".verdict"}},
	} {
		code, hdr, body := get(t, base+tc.path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", tc.path, code, body)
			continue
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.ctype)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q lacks script-src 'self'", tc.path, csp)
		}
		// Every page but the login links the sessions, the access log and
		// the dashboard, and has a logout form.
		if strings.HasPrefix(tc.ctype, "text/html") && tc.path != "/ui/login" && (!strings.Contains(body, `href="/ui/dashboard" data-roles="admin">Dashboard</a>`) ||
			!strings.Contains(body, `<a href="/ui/">Sessions</a>`) || !strings.Contains(body, `href="/ui/?agent_id=acsledger-access" data-roles="admin auditor">Access log</a>`) ||
			!strings.Contains(body, `<form id="logout" class="who" method="post" action="/ui/logout">`)) {
			t.Errorf("GET %s: the header lacks the links to the sessions, access log and dashboard, or the logout", tc.path)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: body lacks %q", tc.path, w)
			}
		}
		// The server never puts the session id into markup: the page is
		// the same shell whatever the id.
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "onerror") {
			t.Errorf("GET %s: hostile string in served markup", tc.path)
		}
	}
	// The script builds the DOM from text nodes and keeps the admin token
	// out of persistent storage: no markup sinks, no localStorage, no
	// cookies.
	_, _, js := get(t, base+"/ui/static/app.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "localStorage.", "document.cookie", "eval("} {
		if strings.Contains(js, sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	code, hdr, _ := func() (int, http.Header, string) {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(base + "/ui")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header, ""
	}()
	if code != http.StatusMovedPermanently || hdr.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d Location %q, want 301 to /ui/", code, hdr.Get("Location"))
	}
	if code, _, _ := get(t, base+"/ui/static/nope.js"); code != http.StatusNotFound {
		t.Errorf("GET /ui/static/nope.js: %d, want 404", code)
	}
	// The API the pages read still answers beside them.
	if code, _, body := get(t, base+"/api/v1/sessions?agent_id=agent-7"); code != http.StatusOK || !strings.Contains(body, `"session_id":"alpha"`) {
		t.Errorf("API beside the UI: %d %s", code, body)
	}
}

// chromium finds the browser; under CI it must be there.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI must install it (.ci/run)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// dumpDOM loads u in headless Chromium and returns the DOM after the
// page's scripts ran.
func dumpDOM(t *testing.T, bin, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=10000"}
	args = append(args, "--dump-dom", u)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", u, err, stderr.String())
	}
	return string(out)
}

// mustContain reports each of wants that page's dom does not contain.
func mustContain(t *testing.T, page, dom string, wants []string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(dom, w) {
			t.Errorf("%s lacks %q\n%s", page, w, dom)
		}
	}
}

func TestBrowser(t *testing.T) {
	bin := chromium(t)
	base := newServer(t)

	t.Run("sessions", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/")
		mustContain(t, "sessions page", dom, []string{
			`<a href="/ui/sessions/alpha">alpha</a>`,
			`agent-7`,
			// The hostile id is shown as text and linked encoded.
			`sess-&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)`,
			`href="/ui/sessions/sess-%3Cimg%20src=x%20onerror=alert%281%29%3E%3Cscript%3Ealert%282%29"`,
		})
		if strings.Contains(dom, "<img") || strings.Contains(dom, "<script>alert") {
			t.Errorf("sessions page rendered hostile markup\n%s", dom)
		}
	})

	t.Run("filtered", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/?agent_id=agent-9")
		if strings.Contains(dom, `>alpha</a>`) || !strings.Contains(dom, "agent-9") {
			t.Errorf("agent_id=agent-9 filter not applied\n%s", dom)
		}
		dom = dumpDOM(t, bin, base+"/ui/?agent_id=nobody")
		if !strings.Contains(dom, "No session matches these filters.") {
			t.Errorf("empty filter result not said\n%s", dom)
		}
	})

	t.Run("paging", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/?limit=1")
		m := regexp.MustCompile(`<a id="next" href="(/ui/\?[^"]+)">`).FindStringSubmatch(dom)
		if m == nil || !strings.Contains(dom, `>alpha</a>`) || strings.Contains(dom, "agent-9") {
			t.Fatalf("first page of one: want alpha and a next link\n%s", dom)
		}
		next := html.UnescapeString(m[1])
		if !strings.Contains(next, "cursor=") || !strings.Contains(next, "limit=1") {
			t.Errorf("next link %q lacks cursor or limit", next)
		}
		dom = dumpDOM(t, bin, base+next)
		if strings.Contains(dom, `>alpha</a>`) || !strings.Contains(dom, "agent-9") {
			t.Errorf("second page: want only the second session\n%s", dom)
		}
		if strings.Contains(dom, `<a id="next" href=`) {
			t.Errorf("last page still links a next page\n%s", dom)
		}
	})

	t.Run("session", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/sessions/alpha")
		mustContain(t, "session page", dom, []string{
			`steps/sessionStart`, `steps/toolCallRequest`, `steps/agentResponse`,
			`<a href="/ui/decisions/req-0001?session_id=alpha">req-0001</a>`, `req-0002`, `req-0003`,
			`>DENY</span>`, `>ALLOW</span>`,
			`2026-03-14 14:02:01 UTC`,
			// No Merkle log is configured, so the server's verdict is that
			// the session is not anchored.
			`✗ Not verified: `, `not_anchored`,
			`href="/api/v1/sessions/alpha/bundle"`,
			`href="/api/v1/sessions/alpha/entries?format=jsonl"`,
		})
		if strings.Contains(dom, "Verifying…") || strings.Contains(dom, "Loading entries…") {
			t.Errorf("session page still loading\n%s", dom)
		}
	})

	t.Run("hostile session", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/sessions/"+url.PathEscape(hostileSession))
		mustContain(t, "hostile session page", dom, []string{
			`<code id="session-id">sess-&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)</code>`,
			`&lt;script&gt;document.body.dataset.pwned='1'&lt;/script&gt;`,
			`steps/toolCallRequest`,
			`not_anchored`,
		})
		if strings.Contains(dom, "<img") || strings.Contains(dom, "data-pwned") || strings.Contains(dom, "<script>document") {
			t.Errorf("hostile session page rendered markup from data\n%s", dom)
		}
	})

	t.Run("decision without policy", func(t *testing.T) {
		// A step written by another ACS writer records its decision as a
		// string and cites no policy: shown, with nothing to replay.
		dom := dumpDOM(t, bin, base+"/ui/decisions/req-0002?session_id=alpha")
		mustContain(t, "decision page", dom, []string{
			`<code id="request-id">req-0002</code>`, `<dd>DENY</dd>`, `<dd>1</dd>`, `steps/toolCallRequest`,
			`href="/ui/sessions/alpha">← Session alpha</a>`, `nothing to replay`,
		})
		if !strings.Contains(dom, `<form id="replay-form" aria-label="Replay" hidden="">`) {
			t.Errorf("a Replay form for a decision that cites no policy\n%s", dom)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		dom := dumpDOM(t, bin, base+"/ui/sessions/nope")
		if !strings.Contains(dom, "Could not load the session:") || !strings.Contains(dom, "Could not verify:") {
			t.Errorf("unknown session not reported\n%s", dom)
		}
	})

}
