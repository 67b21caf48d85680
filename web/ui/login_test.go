package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/ui"
)

// loginServer serves the API and the UI over f's store with stored
// tokens only (no bootstrap token) and the access log on, and returns a
// viewer's and an auditor's token.
func loginServer(t *testing.T, f *evidencetest.Fixture) (base, viewer, auditor string) {
	t.Helper()
	var ts web.Tokens = f.Store
	mk := func(name string, role web.Role) string {
		return webtest.Token(t, ts, web.TokenRequest{Name: name, Role: role})
	}
	viewer, auditor = mk("vera", web.RoleViewer), mk("audrey", web.RoleAuditor)
	h := web.New(f.Store, web.Options{Evidence: web.EvidenceOptions{Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t)}, Auth: web.AuthOptions{Tokens: ts}})
	ui.Mount(h.Router())
	return webtest.Serve(t, h), viewer, auditor
}

// fetchStatus runs fetch in the page and answers "status credential".
func fetchStatus(t *testing.T, ctx context.Context, method, path string, withCSRF bool) string {
	t.Helper()
	hdr := `{"Content-Type": "application/json"}`
	if withCSRF {
		hdr = `{"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}`
	}
	expr := fmt.Sprintf(`fetch(%q, {method: %q, headers: %s, body: %s}).then(async r => r.status + " " + ((await r.json().catch(() => ({}))).credential || ""))`,
		path, method, hdr, map[bool]string{true: `"{}"`, false: "undefined"}[method == "POST"])
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return strings.TrimSpace(v)
}

// TestLoginCookie checks the login's answers over plain HTTP: the cookie's
// attributes, a refused token, and the CSRF rule on a cookie's POST.
func TestLoginCookie(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, viewer, auditor := loginServer(t, f)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path string, form url.Values, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	resp := post("/ui/login", url.Values{"token": {"acsl_" + strings.Repeat("A", 43)}, "next": {"/ui/dashboard"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/login?error=unknown&next=%2Fui%2Fdashboard" || len(resp.Cookies()) != 0 {
		t.Errorf("unknown token: %d %q cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	resp = post("/ui/login", url.Values{"token": {auditor}, "next": {"//evil.example/"}})
	sc := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q, want 303 to /ui/ (an off-site next is ignored)", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, attr := range []string{"acsledger_session=", "Path=/", "Max-Age=28800", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(sc, attr) {
			t.Errorf("Set-Cookie %q lacks %s", sc, attr)
		}
	}
	if strings.Contains(sc, "Secure") || strings.Contains(sc, auditor) || strings.Contains(sc, auditor[5:]) {
		t.Errorf("Set-Cookie %q: Secure without TLS, or the token itself", sc)
	}
	cookie := resp.Cookies()[0]

	call := func(method, path string, hdr ...string) (int, map[string]string) {
		t.Helper()
		// The session cookie alone: no bearer token.
		hdr = append([]string{"Authorization", "", "Cookie", cookie.Name + "=" + cookie.Value}, hdr...)
		code, _, b := webtest.Do(t, method, base+path, []byte("{}"), hdr...)
		var out map[string]string
		json.Unmarshal(b, &out)
		return code, out
	}
	code, me := call("GET", "/api/v1/whoami")
	if code != 200 || me["name"] != "audrey" || me["role"] != "auditor" || len(me["csrf_token"]) < 40 {
		t.Fatalf("whoami: %d %v", code, me)
	}
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	replay := "/api/v1/decisions/" + deny.RequestID + "/replay"
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"no CSRF token", nil},
		{"a wrong CSRF token", []string{"X-CSRF-Token", me["csrf_token"][:20] + "x"}},
		{"another origin", []string{"X-CSRF-Token", me["csrf_token"], "Origin", "https://evil.example"}},
	} {
		if code, out := call("POST", replay, tc.hdr...); code != 403 || out["credential"] != "csrf" {
			t.Errorf("replay with %s: %d %v, want 403 csrf", tc.name, code, out)
		}
	}
	if code, out := call("POST", replay, "X-CSRF-Token", me["csrf_token"], "Content-Type", "application/json"); code != 200 {
		t.Errorf("replay with the CSRF token: %d %v", code, out)
	}
	// A bearer token needs no CSRF token: no browser sends it by itself.
	req, _ := http.NewRequest("POST", base+replay, nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a viewer's replay: %v %v, want 403 (wrong role)", resp, err)
	}
	// Logout needs the CSRF token too, and ends the session.
	if resp := post("/ui/logout", url.Values{}, "Cookie", cookie.Name+"="+cookie.Value); resp.StatusCode != 403 {
		t.Errorf("logout without the CSRF token: %d", resp.StatusCode)
	}
	if resp := post("/ui/logout", url.Values{"csrf": {me["csrf_token"]}}, "Cookie", cookie.Name+"="+cookie.Value); resp.StatusCode != 303 || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	if code, out := call("GET", "/api/v1/whoami"); code != 401 || out["credential"] != "expired" {
		t.Errorf("whoami after logout: %d %v", code, out)
	}
}

// TestLogin logs in through the login page in Chromium and checks what
// each role sees and may do.
func TestLogin(t *testing.T) {
	chromium(t)
	f := evidencetest.New(t, "sqlite")
	base, viewer, auditor := loginServer(t, f)
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	b := browse(t)
	whoExpr := `(document.getElementById("who") || {textContent: ""}).textContent`

	t.Run("refused token", func(t *testing.T) {
		run(t, b, "open a session page", chromedp.Navigate(base+"/ui/sessions/"+deny.SessionID))
		settle(t, b, `location.pathname + location.search`, "/ui/login?next=%2Fui%2Fsessions%2F"+url.QueryEscape(deny.SessionID))
		run(t, b, "type an unknown token", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", "acsl_"+strings.Repeat("B", 43)), chromedp.Click("#login-button"))
		settle(t, b, `(document.getElementById("login-error") || {textContent: ""}).textContent`, "This server does not know that token.")
		run(t, b, "type no token at all", chromedp.SendKeys("#token", "nope"), chromedp.Click("#login-button"))
		settle(t, b, `(document.getElementById("login-error") || {textContent: ""}).textContent`, "That is not an acsledger token")
	})

	t.Run("viewer", func(t *testing.T) {
		run(t, b, "log in as the viewer", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", viewer), chromedp.Click("#login-button"))
		settle(t, b, whoExpr, "vera (viewer)")
		if got := eval[string](t, b, `location.pathname`); got != "/ui/sessions/"+deny.SessionID {
			t.Errorf("after login the browser is at %s, want the page it asked for", got)
		}
		waitText(t, b, "#verdict", "Verified")
		if got := eval[string](t, b, `[!!document.getElementById("export-section"), !!document.getElementById("dashboard-link"), !!document.getElementById("access-link"), document.cookie].join("|")`); got != "false|false|false|" {
			t.Errorf("the viewer's session page: export section|dashboard link|access log link|document.cookie = %q, want none of them", got)
		}
		run(t, b, "open the decision", chromedp.Navigate(base+"/ui/decisions/"+deny.RequestID+"?session_id="+deny.SessionID))
		waitText(t, b, "#disposition", "deny")
		if eval[bool](t, b, `!!document.getElementById("replay-section")`) {
			t.Error("the viewer is offered a replay")
		}
		// The server refuses what the page does not offer.
		if got := fetchStatus(t, b, "POST", "/api/v1/decisions/"+deny.RequestID+"/replay", true); got != "403 wrong_role" {
			t.Errorf("a viewer's replay: %s, want 403 wrong_role", got)
		}
		if got := fetchStatus(t, b, "GET", "/api/v1/sessions/"+deny.SessionID+"/bundle", false); got != "403 wrong_role" {
			t.Errorf("a viewer's bundle export: %s, want 403 wrong_role", got)
		}
		if got := fetchStatus(t, b, "GET", "/api/v1/sessions/"+deny.SessionID+"/entries?format=jsonl", false); got != "403 wrong_role" {
			t.Errorf("a viewer's chain export: %s, want 403 wrong_role", got)
		}
		run(t, b, "open the dashboard", chromedp.Navigate(base+"/ui/dashboard"))
		if got := eval[string](t, b, `document.body.textContent`); !strings.Contains(got, `"credential":"wrong_role"`) {
			t.Errorf("the viewer's dashboard: %q, want a 403 wrong_role", got)
		}
	})

	t.Run("logout", func(t *testing.T) {
		run(t, b, "open the sessions", chromedp.Navigate(base+"/ui/"))
		settle(t, b, whoExpr, "vera (viewer)")
		// The server ends the UI session before the browser leaves the
		// page: a fetch that then gets 401 must not send the browser to the
		// plain login page instead of the logout's "You are logged out.".
		// Submit with the navigation held back, then fail a fetch.
		if got := eval[string](t, b, `(() => {
			const f = document.getElementById("logout");
			f.addEventListener("submit", e => e.preventDefault());
			f.requestSubmit();
			toLogin();
			return location.pathname;
		})()`); got != "/ui/" {
			t.Fatalf("the page is at %s before the check", got)
		}
		// location.assign navigates later: give it the time to.
		time.Sleep(1500 * time.Millisecond)
		if got := eval[string](t, b, `location.pathname + location.search`); got != "/ui/" {
			t.Errorf("after a logout was submitted, a 401 took the browser to %s", got)
		}
		run(t, b, "reopen the sessions", chromedp.Navigate(base+"/ui/"))
		settle(t, b, whoExpr, "vera (viewer)")
		run(t, b, "log out", chromedp.Click("#logout-button"))
		settle(t, b, `(document.getElementById("login-error") || {textContent: ""}).textContent`, "You are logged out.")
		run(t, b, "open the sessions again", chromedp.Navigate(base+"/ui/"))
		settle(t, b, `location.pathname`, "/ui/login")
	})

	t.Run("auditor", func(t *testing.T) {
		run(t, b, "log in as the auditor", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", auditor), chromedp.Click("#login-button"))
		settle(t, b, whoExpr, "audrey (auditor)")
		run(t, b, "open the session", chromedp.Navigate(base+"/ui/sessions/"+deny.SessionID))
		settle(t, b, whoExpr, "audrey (auditor)")
		waitText(t, b, "#export-section", "Evidence bundle")
		if eval[bool](t, b, `!!document.getElementById("dashboard-link")`) {
			t.Error("the auditor is offered the admin dashboard")
		}
		// A change made with the cookie needs the CSRF token.
		if got := fetchStatus(t, b, "POST", "/api/v1/decisions/"+deny.RequestID+"/replay", false); got != "403 csrf" {
			t.Errorf("replay without the CSRF token: %s, want 403 csrf", got)
		}
		run(t, b, "open the decision", chromedp.Navigate(base+"/ui/decisions/"+deny.RequestID+"?session_id="+deny.SessionID))
		waitText(t, b, "#version", "(recorded)")
		run(t, b, "replay", chromedp.Click("#replay"))
		waitText(t, b, "#replay-verdict", "Same decision")
		// Every read above is in the access log, which the auditor sees.
		run(t, b, "open the access log", chromedp.Click("#access-link"))
		settle(t, b, `(document.querySelector("#sessions tbody") || {textContent: ""}).textContent`, web.AccessSessionID(time.Now()))
	})
}
