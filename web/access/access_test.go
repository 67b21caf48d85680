package access_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// authServer serves the API over a fixture's store with its tokens and the
// given options, plus an /acs that answers what it read.
func authServer(t *testing.T, opts access.Options) (string, access.Tokens, func(name string, role access.Role, scope string) string) {
	t.Helper()
	f := evidencetest.New(t, "sqlite")
	var ts access.Tokens = f.Store
	opts.Tokens = ts
	h := web.New(f.Store, web.Options{Auth: opts, MaxEntryBytes: 1 << 10})
	h.Router().Post("/acs", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		w.Write(b)
	})
	mk := func(name string, role access.Role, scope string) string {
		return webtest.Token(t, ts, access.TokenRequest{Name: name, Role: role, Scope: scope})
	}
	return webtest.Serve(t, h), ts, mk
}

func TestACSRequireToken(t *testing.T) {
	base, _, mk := authServer(t, access.Options{ACSRequireToken: true, NoAccessLog: true})
	alice, bob, viewer := mk("alice", access.RoleWriter, ""), mk("bob", access.RoleWriter, ""), mk("vera", access.RoleViewer, "")
	teamA := mk("team-a", access.RoleWriter, "team-a/")
	msg := func(session, agent string) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{"metadata":{"session_id":%q,"agent_id":%q}}}`, session, agent)
	}
	for _, tc := range []struct {
		name, token string
		body        []byte
		code        int
		why         string
	}{
		{"no token", "", msg("s1", "agent"), 401, "missing"},
		{"a viewer", viewer, msg("s1", "agent"), 403, "wrong_role"},
		{"alice opens s1", alice, msg("s1", "agent"), 200, ""},
		{"bob on alice's s1", bob, msg("s1", "agent"), 403, "wrong_token"},
		{"bob in a batch with s1", bob, []byte("[" + string(msg("s2", "agent")) + "," + string(msg("s1", "agent")) + "]"), 403, "wrong_token"},
		{"alice again", alice, msg("s1", "agent"), 200, ""},
		{"team-a, other team's agent", teamA, msg("s3", "team-b/bot"), 403, "wrong_role"},
		{"team-a, own agent", teamA, msg("s3", "team-a/bot"), 200, ""},
		{"unparsable, left to the Guardian", alice, []byte(`{"jsonrpc":`), 200, ""},
	} {
		req, _ := http.NewRequest("POST", base+"/acs", bytes.NewReader(tc.body))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e access.AuthErrorBody
		json.Unmarshal(b, &e)
		if resp.StatusCode != tc.code || e.Credential != tc.why || tc.code == 200 && !bytes.Equal(b, tc.body) {
			t.Errorf("%s: %d %s, want %d %q (and the body passed on whole)", tc.name, resp.StatusCode, b, tc.code, tc.why)
		}
	}
}

// TestRateLimits: a credential over its rate and an address guessing
// tokens get 429 with Retry-After; the guesses stop reaching the token
// lookup.
func TestRateLimits(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	base, _, mk := authServer(t, access.Options{NoAccessLog: true, Now: clock,
		RateLimits: access.RateLimits{PerAddress: 1000, PerCredential: 2, FailuresPerMinute: 6, FailureBurst: 3}})
	tok := mk("busy", access.RoleAuditor, "")
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", base+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	var codes []int
	for range 5 {
		c, _ := get(tok)
		codes = append(codes, c)
	}
	c, retry := get(tok)
	if fmt.Sprint(codes) != "[200 200 200 200 429]" || c != 429 || retry != "1" {
		t.Errorf("a burst of 4 at 2/s: %v then %d Retry-After %q, want 4 x 200 then 429 with Retry-After 1", codes, c, retry)
	}
	now = now.Add(time.Second)
	if c, _ := get(tok); c != 200 {
		t.Errorf("a second later: %d, want 200", c)
	}

	// Three wrong guesses, then the address waits 10 s per guess (6 a
	// minute), and even the right token waits with it.
	bad := "acsl_" + strings.Repeat("Z", 43)
	for i := range 3 {
		if c, _ := get(bad); c != 401 {
			t.Errorf("guess %d: %d, want 401", i, c)
		}
	}
	if c, retry := get(bad); c != 429 || retry != "10" {
		t.Errorf("fourth guess: %d Retry-After %q, want 429 and 10", c, retry)
	}
	if c, _ := get(tok); c != 429 {
		t.Errorf("the right token from a blocked address: %d, want 429", c)
	}
	now = now.Add(10 * time.Second)
	if c, _ := get(tok); c != 200 {
		t.Errorf("after the wait: %d, want 200", c)
	}
}

// TestBodyLimits: every route that takes a body caps it, public ones
// included.
func TestBodyLimits(t *testing.T) {
	base, _, mk := authServer(t, access.Options{NoAccessLog: true})
	admin := mk("root", access.RoleAdmin, "")
	// The server's entry cap is 1 KiB; /acs has its own, 4 MiB.
	for path, size := range map[string]int{"/api/v1/sessions/s/entries?agent_id=a": 2 << 10, "/api/v1/admin/tokens": 2 << 10, "/acs": 5 << 20} {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"name":"`+strings.Repeat("x", size)))
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("POST %s with 2 KiB: %d, want 413", path, resp.StatusCode)
		}
	}
}

// TestRefusedUploadUnread: an upload that access control refuses, with no
// credential, with a role that may not write, or over the rate limit, is
// answered while its body is still open: the server does not wait to read
// what it refused.
func TestRefusedUploadUnread(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base, _, mk := authServer(t, access.Options{NoAccessLog: true, Now: func() time.Time { return now },
		RateLimits: access.RateLimits{PerAddress: 1000, PerCredential: 0.5}}) // a burst of 1, never refilled
	viewer, writer := mk("v", access.RoleViewer, ""), mk("w", access.RoleWriter, "")
	for _, c := range []struct {
		name, token string
		code        int
	}{{"no credential", "", 401}, {"a viewer", viewer, 403}, {"a writer, first", writer, 0}, {"a writer over its rate", writer, 429}} {
		send := func(body io.Reader) (*http.Response, error) {
			req, _ := http.NewRequest("POST", base+"/api/v1/sessions/s/entries?agent_id=a", body)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			return http.DefaultClient.Do(req)
		}
		body, refused := webtest.SlowUpload(t, send)
		if c.code == 0 {
			// Admitted: it takes the writer's one request.
			body.Close()
			webtest.Answer(t, refused, c.name)
			continue
		}
		if got := webtest.Answer(t, refused, c.name+", refused while its body was still open"); got.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, got.Code, got.Body, c.code)
		}
	}
}

// TestTokenAPI: the admin API shows a new token once, lists tokens
// without them, and a revocation ends the token's UI sessions too.
func TestTokenAPI(t *testing.T) {
	base, _, mk := authServer(t, access.Options{NoAccessLog: true})
	admin := mk("root", access.RoleAdmin, "")
	call := func(method, path, token, body string, cookie *http.Cookie) (int, []byte, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		if path == "/ui/login" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, b, resp
	}
	code, b, _ := call("POST", "/api/v1/admin/tokens", admin, `{"name":"ci","role":"auditor","scope":"team-a/","expires_in":"720h"}`, nil)
	var created access.TokenJSON
	if err := json.Unmarshal(b, &created); err != nil || code != 201 || !access.WellFormed(created.Token) || created.Role != "auditor" || created.Scope != "team-a/" ||
		created.ExpiresAt == nil || created.ExpiresAt.Sub(created.CreatedAt) != 720*time.Hour {
		t.Fatalf("create: %d %s", code, b)
	}
	for _, bad := range []string{`{"role":"root"}`, `{"role":"viewer","expires_in":"soon"}`, `{"role":"viewer","extra":1}`, `{"name":"ci","role":"viewer"}`, `{"name":"bootstrap","role":"viewer"}`} {
		if code, b, _ := call("POST", "/api/v1/admin/tokens", admin, bad, nil); code != 400 && code != 409 {
			t.Errorf("create %s: %d %s, want 400 or 409", bad, code, b)
		}
	}
	code, b, _ = call("GET", "/api/v1/admin/tokens", admin, "", nil)
	if code != 200 || !bytes.Contains(b, []byte(`"name":"ci"`)) || bytes.Contains(b, []byte(created.Token)) || bytes.Contains(b, []byte(`"token"`)) {
		t.Errorf("list: %d %s", code, b)
	}
	// A UI session opened with the token ends with its revocation.
	code, _, resp := call("POST", "/ui/login", "", "token="+created.Token, nil)
	if code != 303 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d", code)
	}
	cookie := resp.Cookies()[0]
	if code, b, _ := call("GET", "/api/v1/whoami", "", "", cookie); code != 200 || !bytes.Contains(b, []byte(`"name":"ci"`)) {
		t.Fatalf("whoami with the cookie: %d %s", code, b)
	}
	if code, b, _ := call("POST", "/api/v1/admin/tokens/ci/revoke", admin, "", nil); code != 200 {
		t.Fatalf("revoke: %d %s", code, b)
	}
	if code, b, _ := call("POST", "/api/v1/admin/tokens/nobody/revoke", admin, "", nil); code != 404 {
		t.Errorf("revoke an unknown name: %d %s", code, b)
	}
	for name, c := range map[string]*http.Cookie{"cookie": cookie, "bearer": nil} {
		tok := created.Token
		if c != nil {
			tok = ""
		}
		if code, b, _ := call("GET", "/api/v1/whoami", tok, "", c); code != 401 || !bytes.Contains(b, []byte(`"credential":"revoked"`)) {
			t.Errorf("%s after revocation: %d %s", name, code, b)
		}
	}
}
