package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web"
)

// securityTable reads the route table of docs/security.md as
// "METHOD pattern" -> "public" or the roles, comma-separated.
func securityTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([A-Z]+)` \\| `([^`]+)` \\| ([^|]+?) \\| (yes)? ?\\|$")
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if m := row.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			who := m[3]
			if m[4] == "yes" {
				who += " (recorded)"
			}
			out[m[1]+" "+m[2]] = who
		}
	}
	return out
}

// tableRow renders a row of web.AccessTable as securityTable does.
func tableRow(rt web.Route) string {
	who := "public"
	if !rt.Public {
		var rs []string
		for _, r := range rt.Roles {
			rs = append(rs, string(r))
		}
		who = strings.Join(rs, ", ")
	}
	if rt.Recorded {
		who += " (recorded)"
	}
	return who
}

// TestAccessTableMatchesRouter: docs/security.md, web.AccessTable and the
// routes serve registers (web, the Merkle log, the UI, metrics and the
// Guardian, as mountRoutes mounts them) name the same routes with the same
// roles.
func TestAccessTableMatchesRouter(t *testing.T) {
	doc := securityTable(t)
	table := map[string]string{}
	for _, rt := range web.AccessTable {
		k := rt.Method + " " + rt.Pattern
		if _, dup := table[k]; dup {
			t.Errorf("web.AccessTable lists %s twice", k)
		}
		table[k] = tableRow(rt)
	}
	for k, who := range table {
		if doc[k] != who {
			t.Errorf("%s: docs/security.md says %q, web.AccessTable %q", k, doc[k], who)
		}
	}
	for k := range doc {
		if _, ok := table[k]; !ok {
			t.Errorf("docs/security.md lists %s, which web.AccessTable does not", k)
		}
	}
	h := web.New(nil, web.Options{})
	mountRoutes(h.Router(), nil, http.NotFoundHandler(), http.NotFoundHandler(), http.NotFoundHandler(), nil)
	registered := map[string]bool{}
	err := chi.Walk(h.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// chi reports the routes of a mounted subrouter without its
		// trailing slash handling: "/api/v1/sessions/" is "/api/v1/sessions".
		if route != "/" && route != "/ui/" {
			route = strings.TrimSuffix(route, "/")
		}
		registered[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range registered {
		if _, ok := table[k]; !ok {
			t.Errorf("%s is registered but has no row in web.AccessTable (and docs/security.md)", k)
		}
	}
	for k := range table {
		if !registered[k] {
			t.Errorf("web.AccessTable lists %s, which no one registers", k)
		}
	}
	if len(registered) < 30 {
		t.Errorf("only %d routes registered: %v", len(registered), registered)
	}
}

// cred is a credential of the walk: a header value, "" for none.
type cred struct {
	name, bearer string
	role         web.Role
}

// call makes one request with an optional bearer token and answers the
// status, the body and the decoded "credential" of an auth refusal.
func call(t *testing.T, client *http.Client, method, url, bearer string, body []byte, hdr ...string) (int, []byte, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Credential string `json:"credential"`
	}
	json.Unmarshal(b, &e)
	return resp.StatusCode, b, e.Credential
}

// tokenCLI runs acsledger token ... on dir and returns its stdout.
func tokenCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"token", args[0], "--db", dir}, args[1:]...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("token %v: %v\n%s", args, err, stderr.String())
	}
	if tok := strings.TrimSpace(stdout.String()); strings.HasPrefix(tok, "acsl_") && strings.Contains(stderr.String(), tok) {
		t.Errorf("token %v repeated the token on stderr: %s", args, stderr.String())
	}
	return stdout.String()
}

// newToken creates a token with the CLI and returns it.
func newToken(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out := tokenCLI(t, dir, append([]string{"create"}, args...)...)
	tok := strings.TrimSpace(out)
	if !regexp.MustCompile(`^acsl_[A-Za-z0-9_-]{43}$`).MatchString(tok) || strings.Count(out, "\n") != 1 {
		t.Fatalf("token create printed %q, want one token alone on a line", out)
	}
	return tok
}

// TestAccessTable walks every row of web.AccessTable against a running
// server: without a credential, with each role's token, with a revoked
// and an expired token, and with a scoped token on a session out of its
// scope. Afterwards the access log of the walk verifies as a bundle, and
// no token string is found in the data directory or the server's logs.
func TestAccessTable(t *testing.T) {
	stores(t, func(t *testing.T, db string) {
		if !strings.HasPrefix(db, "postgres") {
			db = filepath.Join(db, "data")
		}
		testAccessTable(t, db)
	})
}

func testAccessTable(t *testing.T, dir string) {
	migrateStore(t, dir)
	var creds []cred
	tokens := map[string]string{}
	for _, r := range web.Roles {
		tok := newToken(t, dir, "--role", string(r), "--name", "walk-"+string(r))
		creds = append(creds, cred{name: "walk-" + string(r), bearer: tok, role: r})
		tokens["walk-"+string(r)] = tok
	}
	revoked := newToken(t, dir, "--role", "admin", "--name", "revoked-admin")
	if out := tokenCLI(t, dir, "revoke", "revoked-admin"); out != "revoked revoked-admin\n" {
		t.Fatalf("revoke said %q", out)
	}
	expired := newToken(t, dir, "--role", "admin", "--name", "short-lived", "--expires", "1s")
	scopedTok := newToken(t, dir, "--role", "auditor", "--name", "team-a-auditor", "--scope", "team-a/")
	newToken(t, dir, "--role", "viewer", "--name", "walk-victim")
	tokens["revoked-admin"], tokens["short-lived"], tokens["team-a-auditor"] = revoked, expired, scopedTok

	list := tokenCLI(t, dir, "list")
	for name, tok := range tokens {
		if !strings.Contains(list, name) || strings.Contains(list, tok) || strings.Contains(list, tok[5:20]) {
			t.Errorf("token list: %q should name %s and show no token", list, name)
		}
	}
	if !strings.Contains(list, "revoked ") || !strings.Contains(list, "team-a/") {
		t.Errorf("token list does not show the revocation and the scope:\n%s", list)
	}

	s := startServer(t, "--db", dir, "--rate-limit", "-1")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	admin := tokens["walk-admin"]
	for i := range 2 {
		for _, sess := range []struct{ id, agent string }{{"s-a", "team-a/bot"}, {"s-b", "team-b/bot"}} {
			body := fmt.Sprintf(`{"entry_id":"%s-e%d","step_id":"%s-req-%d","step_type":"steps/toolCallRequest","decision":"allow"}`, sess.id, i, sess.id, i)
			if code, b, _ := call(t, client, "POST", s.url+"/api/v1/sessions/"+sess.id+"/entries?agent_id="+sess.agent, admin, []byte(body)); code != 201 {
				t.Fatalf("seed %s: %d %s", sess.id, code, b)
			}
		}
	}
	time.Sleep(1100 * time.Millisecond) // short-lived expires

	// Each row with its parameters filled in and a body that route takes.
	fill := strings.NewReplacer("{session_id}", "s-a", "{position}", "0", "{request_id}", "s-a-req-0", "{name}", "walk-victim",
		"/tile/*", "/tile/0/000", "/ui/static/*", "/ui/static/style.css")
	bodies := map[string]string{
		"POST /api/v1/sessions/{session_id}/entries": `{"entry_id":"walk","step_id":"walk","step_type":"steps/toolCallRequest"}`,
		"POST /api/v1/admin/tokens":                  `{"role":"viewer"}`,
		"POST /acs":                                  `{"jsonrpc":"2.0","id":1,"method":"system/ping"}`,
		"POST /api/v1/verify/bundle":                 `{}`,
		"POST /api/v1/decisions/{request_id}/replay": ``,
	}
	refused := func(code int) bool { return code == 401 || code == 403 }
	for _, rt := range web.AccessTable {
		key := rt.Method + " " + rt.Pattern
		u := s.url + fill.Replace(rt.Pattern)
		body := []byte(bodies[key])
		t.Run(key, func(t *testing.T) {
			code, b, why := call(t, client, rt.Method, u, "", body)
			switch {
			case rt.Public && refused(code):
				t.Errorf("public, but refused without a credential: %d %s", code, b)
			case !rt.Public && strings.HasPrefix(rt.Pattern, "/ui/") && rt.Method == "GET":
				if code != 303 {
					t.Errorf("no credential: %d %s, want 303 to the login page", code, b)
				}
			case !rt.Public && (code != 401 || why != "missing"):
				t.Errorf("no credential: %d %s, want 401 missing", code, b)
			}
			if rt.Public {
				return
			}
			for _, c := range creds {
				code, b, why := call(t, client, rt.Method, u, c.bearer, body)
				if rt.Allows(c.role) && refused(code) {
					t.Errorf("%s: refused: %d %s", c.role, code, b)
				}
				if !rt.Allows(c.role) && (code != 403 || why != "wrong_role") {
					t.Errorf("%s: %d %s, want 403 wrong_role", c.role, code, b)
				}
			}
			for _, c := range []struct{ token, why string }{{revoked, "revoked"}, {expired, "expired"}, {"acsl_" + strings.Repeat("A", 43), "unknown"}, {"nope", "malformed"}} {
				code, b, why := call(t, client, rt.Method, u, c.token, body)
				if code != 401 || why != c.why || bytes.Contains(b, []byte("s-a")) {
					t.Errorf("%s token: %d %s, want 401 %s saying nothing of the resource", c.why, code, b, c.why)
				}
			}
		})
	}

	t.Run("out of scope", func(t *testing.T) {
		for _, path := range []string{"/api/v1/sessions/%s", "/api/v1/sessions/%s/entries", "/api/v1/sessions/%s/bundle", "/api/v1/sessions/%s/verify", "/api/v1/proofs/entry/%s/0", "/api/v1/decisions/%s-req-0"} {
			in, inBody, _ := call(t, client, "GET", s.url+fmt.Sprintf(path, "s-a"), scopedTok, nil)
			out, outBody, _ := call(t, client, "GET", s.url+fmt.Sprintf(path, "s-b"), scopedTok, nil)
			none, noneBody, _ := call(t, client, "GET", s.url+fmt.Sprintf(path, "s-none"), scopedTok, nil)
			if in != 200 {
				t.Errorf("%s in scope: %d %s", path, in, inBody)
			}
			if out != 404 || none != 404 || !bytes.Equal(outBody, bytes.ReplaceAll(noneBody, []byte("s-none"), []byte("s-b"))) {
				t.Errorf("%s out of scope: %d %s; unknown: %d %s; want the same 404", path, out, outBody, none, noneBody)
			}
		}
		code, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions", scopedTok, nil)
		if code != 200 || !bytes.Contains(b, []byte(`"s-a"`)) || bytes.Contains(b, []byte(`"s-b"`)) {
			t.Errorf("scoped list: %d %s, want s-a only", code, b)
		}
		code, b, _ = call(t, client, "POST", s.url+"/api/v1/decisions/s-b-req-0/replay", scopedTok, nil)
		if code != 404 {
			t.Errorf("scoped replay of s-b: %d %s", code, b)
		}
		// A scoped writer cannot create a session for another team.
		w := newToken(t, dir, "--role", "writer", "--name", "team-a-writer", "--scope", "team-a/")
		tokens["team-a-writer"] = w
		entry := []byte(`{"entry_id":"x","step_id":"x","step_type":"steps/toolCallRequest"}`)
		if code, b, _ := call(t, client, "POST", s.url+"/api/v1/sessions/s-c/entries?agent_id=team-b/bot", w, entry); code != 403 {
			t.Errorf("scoped writer, other team's new session: %d %s", code, b)
		}
		if code, b, _ := call(t, client, "POST", s.url+"/api/v1/sessions/s-b/entries", w, entry); code != 404 {
			t.Errorf("scoped writer, other team's session: %d %s", code, b)
		}
		if code, b, _ := call(t, client, "POST", s.url+"/api/v1/sessions/s-a2/entries?agent_id=team-a/bot", w, entry); code != 201 {
			t.Errorf("scoped writer, own team's new session: %d %s", code, b)
		}
	})

	t.Run("viewer exports nothing", func(t *testing.T) {
		viewer := tokens["walk-viewer"]
		if code, b, why := call(t, client, "GET", s.url+"/api/v1/sessions/s-a/entries?format=jsonl", viewer, nil); code != 403 || why != "wrong_role" {
			t.Errorf("viewer jsonl export: %d %s", code, b)
		}
		if code, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions/s-a/entries", viewer, nil); code != 200 {
			t.Errorf("viewer entries page: %d %s", code, b)
		}
	})

	accessSession := web.AccessSessionID(time.Now())
	t.Run("access log", func(t *testing.T) {
		auditor := tokens["walk-auditor"]
		// Only admins and auditors see it, and only when asked for.
		code, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions?agent_id="+web.AccessAgentID, auditor, nil)
		if code != 200 || !bytes.Contains(b, []byte(accessSession)) {
			t.Fatalf("auditor's list of the access log: %d %s", code, b)
		}
		if _, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions", auditor, nil); bytes.Contains(b, []byte(accessSession)) {
			t.Errorf("the access log is in the plain session list: %s", b)
		}
		for _, who := range []string{"walk-viewer", "team-a-auditor"} {
			if code, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions/"+accessSession, tokens[who], nil); code != 404 {
				t.Errorf("%s reads the access log: %d %s", who, code, b)
			}
		}
		forged := []byte(`{"entry_id":"f","step_id":"f","step_type":"acsledger/access"}`)
		tomorrow := web.AccessSessionID(time.Now().Add(24 * time.Hour))
		for _, path := range []string{accessSession + "/entries", tomorrow + "/entries?agent_id=squatter", "s-x/entries?agent_id=" + web.AccessAgentID} {
			if code, b, _ := call(t, client, "POST", s.url+"/api/v1/sessions/"+path, admin, forged); code != 404 && code != 403 {
				t.Errorf("an append to the access log through the API (%s): %d %s", path, code, b)
			}
		}
		// The viewer's read of s-a is in it: who, role, route, session, from.
		code, b, _ = call(t, client, "GET", s.url+"/api/v1/sessions/"+accessSession+"/entries?limit=1000", auditor, nil)
		if code != 200 {
			t.Fatalf("access log entries: %d %s", code, b)
		}
		var page struct {
			Entries []struct {
				StepType string `json:"step_type"`
				Entry    struct {
					Access map[string]string `json:"access"`
				} `json:"entry"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range page.Entries {
			a := e.Entry.Access
			if e.StepType == web.AccessStepType && a["who"] == "walk-viewer" && a["role"] == "viewer" && a["route"] == "GET /api/v1/sessions/{session_id}" &&
				a["session_id"] == "s-a" && a["from"] == "127.0.0.1" && a["path"] == "/api/v1/sessions/s-a" {
				found = true
			}
		}
		if !found || len(page.Entries) < 20 {
			t.Errorf("the viewer's read of s-a is not among the %d access log entries", len(page.Entries))
		}
		// Its bundle, anchored in the Merkle log, verifies offline.
		var rep *verify.Report
		var bundleFile string
		for deadline := time.Now().Add(20 * time.Second); ; {
			code, b, _ := call(t, client, "GET", s.url+"/api/v1/sessions/"+accessSession+"/bundle", auditor, nil)
			if code != 200 {
				t.Fatalf("access log bundle: %d %s", code, b)
			}
			var err error
			if rep, err = verify.VerifyBundle(bytes.NewReader(b), &verify.Trust{}); err != nil {
				t.Fatal(err)
			}
			if rep.Verified() || time.Now().After(deadline) {
				bundleFile = filepath.Join(t.TempDir(), "access.bundle.json")
				if err := os.WriteFile(bundleFile, b, 0o600); err != nil {
					t.Fatal(err)
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !rep.Verified() || rep.Entries < 20 {
			t.Errorf("the access log's bundle: verified %v, %d entries, findings %v", rep.Verified(), rep.Entries, rep.Findings)
		}
		// And with the auditor's own tool, built from this tree.
		acsverify := filepath.Join(t.TempDir(), "acsverify")
		if out, err := exec.Command("go", "build", "-o", acsverify, "../acsverify").CombinedOutput(); err != nil {
			t.Fatalf("build acsverify: %v\n%s", err, out)
		}
		out, err := exec.Command(acsverify, "bundle", bundleFile).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": verified: ") {
			t.Errorf("acsverify bundle on the access log: %v\n%s", err, out)
		}
	})

	t.Run("no token at rest or in logs", func(t *testing.T) {
		s.stop(t, os.Interrupt)
		logs := s.log()
		tokens["bootstrap"] = testAdminToken
		// An embedded store's whole directory; PostgreSQL keeps its data
		// elsewhere (TestTokens shows its rows hold hashes only).
		walkDir := dir
		if strings.HasPrefix(dir, "postgres") {
			walkDir = t.TempDir()
		}
		err := filepath.WalkDir(walkDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for name, tok := range tokens {
				if bytes.Contains(b, []byte(tok)) {
					t.Errorf("%s holds token %s", path, name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for name, tok := range tokens {
			if strings.Contains(logs, tok) {
				t.Errorf("the server's log holds token %s", name)
			}
		}
		if !strings.Contains(logs, "token created") {
			t.Errorf("the log does not show the walk's token creation (the grep would prove nothing):\n%s", logs)
		}
	})
}
