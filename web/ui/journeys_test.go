package ui_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/tlogserve"
	"github.com/acsledger/acsledger/web/ui"
	"github.com/acsledger/acsledger/web/whatifapi"
)

// The journeys of issue 14, walked in Chromium over a ledger a real
// Guardian wrote: compliance search and export, the auditor's checks in
// the browser (a bundle tampered after export refused with acsverify's
// code), what a viewer does not get, layouts at 1280 and 390 px, and
// hostile strings shown as text. Each journey saves a screenshot into
// $ACSLEDGER_SCREENSHOTS when it is set (make screenshots writes
// docs/screenshots).

// journeyServer serves the API with search and charts, the Merkle log's
// public routes and the UI over f's store, and returns a token per role.
func journeyServer(t *testing.T, f *evidencetest.Fixture) (string, map[web.Role]string) {
	t.Helper()
	return journeyServerWith(t, f, nil)
}

// journeyServerWith is journeyServer with a read replica whose latest
// measurement lag gives, as serve --db-read has; nil for none.
func journeyServerWith(t *testing.T, f *evidencetest.Fixture, lag func() web.ReplicaLag) (string, map[web.Role]string) {
	t.Helper()
	var ts web.Tokens = f.Store
	toks := map[web.Role]string{}
	for _, role := range []web.Role{web.RoleAdmin, web.RoleAuditor, web.RoleViewer} {
		toks[role] = webtest.Token(t, ts, web.TokenRequest{Name: "j-" + string(role), Role: role})
	}
	h := web.New(f.Store, web.Options{
		Evidence:   web.EvidenceOptions{Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t)},
		Search:     f.Store,
		Charts:     f.Store,
		Auth:       web.AuthOptions{Tokens: ts, NoAccessLog: true},
		ReplicaLag: lag,
		// One push sink, failing, as serve --export reports it.
		Export: web.ExportOptions{Store: f.Store, Sinks: func() []export.Status {
			at := time.Now().Add(-time.Minute)
			return []export.Status{{Name: "siem", Delivery: "sent_unconfirmed", NextLeaf: 1, SentTo: 3, LogSize: 6, EntriesBehind: 3, SecondsBehind: 61,
				ResendWindow: 2, SentUnconfirmed: 3, Resent: 2, Failing: true,
				LastError: "export sink siem: couldn't connect to syslog+tcp://siem.example:514", LastErrorAt: &at}}
		}},
		WhatIf: whatifapi.Options{Store: f.Store, Share: 1},
	})
	tlogserve.Mount(h.Router(), f.Log, nil)
	ui.Mount(h.Router())
	return webtest.Serve(t, h), toks
}

// journey serves f as journeyServer does and opens a browser, 1280 pixels
// wide, logged in as role.
func journey(t *testing.T, f *evidencetest.Fixture, role web.Role) (string, context.Context) {
	t.Helper()
	base, toks := journeyServer(t, f)
	b := browse(t)
	viewport(t, b, 1280)
	loginAs(t, b, base, toks[role], role)
	return base, b
}

func loginAs(t *testing.T, ctx context.Context, base, token string, role web.Role) {
	t.Helper()
	run(t, ctx, "log in", chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token), chromedp.Click("#login-button"))
	settle(t, ctx, `(document.getElementById("who") || {textContent: ""}).textContent`, "("+string(role)+")")
}

// screenshot saves the viewport as docs/screenshots/name.png when
// $ACSLEDGER_SCREENSHOTS names a directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ACSLEDGER_SCREENSHOTS")
	if dir == "" {
		return
	}
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func viewport(t *testing.T, ctx context.Context, w int64) {
	t.Helper()
	run(t, ctx, fmt.Sprintf("viewport %d", w), chromedp.EmulateViewport(w, 900))
}

// wait waits until the expression (a boolean) holds.
func wait(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
	}
	t.Fatalf("%s: %s never held\n%s", what, expr, dom(ctx))
}

func TestJourneyCompliance(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, b := journey(t, f, web.RoleAuditor)

	run(t, b, "search denied steps", chromedp.Navigate(base+"/ui/search"), chromedp.WaitVisible("#filters"))
	run(t, b, "pick deny", chromedp.SetValue(`select[name=decision]`, "deny"), chromedp.SendKeys(`input[name=tool]`, "bash"),
		chromedp.Click(`#filters button[type=submit]`))
	wait(t, b, "the denied steps", `document.querySelectorAll("#entry-hits tbody tr").length === 2`)
	if got := eval[string](t, b, `location.search`); !strings.Contains(got, "decision=deny") || !strings.Contains(got, "tool=bash") {
		t.Errorf("the search is not in the address: %s", got)
	}
	rows := eval[[]string](t, b, `[...document.querySelectorAll("#entry-hits tbody tr")].map(r => r.textContent)`)
	for _, r := range rows {
		if !strings.Contains(r, "bash") || !strings.Contains(r, "deny") || !strings.Contains(r, "agent-7") {
			t.Errorf("row %q", r)
		}
	}
	// Each hit links to its bundle, which verifies; the export holds the
	// same rows.
	got := eval[string](t, b, `document.querySelector("#entry-hits a.bundle-link").getAttribute("href")`)
	if !strings.HasPrefix(got, "/api/v1/sessions/") || !strings.HasSuffix(got, "/bundle") {
		t.Errorf("bundle link %q", got)
	}
	csv := evalAwait[string](t, b, `fetch(document.getElementById("export-csv").href).then(r => r.text())`)
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "session_id,position") {
		t.Errorf("csv export: %q", csv)
	}
	screenshot(t, b, "search")

	// The decision is one click away.
	run(t, b, "open the decision", chromedp.Click(`#entry-hits a.disp`))
	settle(t, b, `location.pathname`, "/ui/decisions/")

	// Sessions as results, with their integrity.
	run(t, b, "sessions as results", chromedp.Navigate(base+"/ui/search?as=sessions&decision=deny"))
	wait(t, b, "two sessions", `document.querySelectorAll("#session-hits tbody tr").length === 2`)
	wait(t, b, "their integrity", `[...document.querySelectorAll("#session-hits td.integrity-cell")].every(td => td.textContent.includes("anchored"))`)
	run(t, b, "the session list", chromedp.Navigate(base+"/ui/"))
	wait(t, b, "integrity in the list", `document.querySelectorAll("#sessions td.integrity-cell .integrity").length === 2`)
	screenshot(t, b, "sessions")
}

func evalAwait[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestJourneyAuditor checks, in the browser, a bundle as exported (it
// verifies, as the server says), the same bundle edited after export (it
// is refused with the codes acsverify names), a chain_hash, and a
// checkpoint against an earlier one the auditor kept.
func TestJourneyAuditor(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, b := journey(t, f, web.RoleAuditor)

	run(t, b, "open the log", chromedp.Navigate(base+"/ui/log"))
	wait(t, b, "the checkpoint", `document.getElementById("checkpoint").textContent.startsWith(`+jsString(evidencetest.Origin)+`)`)
	wait(t, b, "its signature checked here", `[...document.querySelectorAll("#signatures tbody tr")].some(r => r.textContent.includes("log") && r.textContent.includes("✓ valid"))`)
	if n := eval[int](t, b, `document.querySelectorAll("#size-chart svg circle").length`); n == 0 {
		t.Errorf("no points in the tree size chart\n%s", dom(b))
	}
	if !eval[bool](t, b, `typeof crypto.subtle !== "undefined"`) || !evalAwait[bool](t, b, `ACSVerify.ed25519Supported()`) {
		t.Fatal("this Chromium has no Ed25519 in WebCrypto")
	}
	earlier := eval[string](t, b, `document.getElementById("checkpoint").textContent`)

	check := func(what, input, session, earlier string) (browser, server []string) {
		t.Helper()
		run(t, b, what, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("input").value = %s;
			document.getElementById("session").value = %s; document.getElementById("earlier").value = %s;
			document.getElementById("browser-verdict").className = "verdict";
			document.getElementById("server-verdict").textContent = "";`, jsString(input), jsString(session), jsString(earlier))),
			chromedp.Click("#check"))
		wait(t, b, what+": the browser's verdict", `/ (ok|bad|error)$/.test(document.getElementById("browser-verdict").className)`)
		wait(t, b, what+": the server's answer", `document.getElementById("server-verdict").textContent !== "" && !document.getElementById("server-verdict").textContent.startsWith("Asking")`)
		codes := func(id string) []string {
			return strings.Fields(eval[string](t, b, `document.getElementById("`+id+`").dataset.codes || ""`))
		}
		return codes("browser-verdict"), codes("server-verdict")
	}

	bundle := evalAwait[string](t, b, `fetch("/api/v1/sessions/`+f.HMACSession+`/bundle").then(r => r.text())`)
	br, sv := check("the bundle as exported", bundle, "", "")
	if len(br) != 0 || len(sv) != 0 || !strings.Contains(eval[string](t, b, `document.getElementById("browser-verdict").className`), "ok") {
		t.Fatalf("exported bundle: browser %v, server %v\n%s", br, sv, eval[string](t, b, `document.getElementById("browser-steps").textContent`))
	}
	if steps := eval[string](t, b, `document.getElementById("browser-steps").textContent`); !strings.Contains(steps, "Inclusion: entry") || !strings.Contains(steps, "Chain: all 4") {
		t.Errorf("steps: %s", steps)
	}

	// Edited after export: one reasoning changed, its entry_hash kept.
	tampered := evalAwait[string](t, b, `fetch("/api/v1/sessions/`+f.HMACSession+`/bundle").then(r => r.json()).then(b => {
		const list = b.entries || b.steps.map(s => s.entry);
		list[1].decision.reasoning = "nothing to see here";
		return JSON.stringify(b);
	})`)
	br, sv = check("the bundle edited after export", tampered, "", "")
	if !slices.Contains(br, "entry_hash_mismatch") || !slices.Contains(sv, "entry_hash_mismatch") {
		t.Fatalf("tampered bundle: browser %v, server %v", br, sv)
	}
	for _, c := range br {
		if !slices.Contains(sv, c) {
			t.Errorf("the browser names %s, which acsverify does not (%v)", c, sv)
		}
	}
	screenshot(t, b, "log-tampered-bundle")

	// A chain_hash: the session's head, checked down to the log's root.
	sess, err := f.Store.Session(context.Background(), f.ECDSASession)
	if err != nil {
		t.Fatal(err)
	}
	br, sv = check("a chain_hash", sess.Head.String(), f.ECDSASession, "")
	if len(br) != 0 || len(sv) != 0 || !strings.Contains(eval[string](t, b, `document.getElementById("browser-steps").textContent`), "Inclusion: leaf") {
		t.Fatalf("chain_hash: browser %v server %v\n%s", br, sv, eval[string](t, b, `document.getElementById("browser-steps").textContent`))
	}

	// The log grows; the checkpoint the auditor kept is consistent with the
	// new one, and a forged earlier checkpoint is refused.
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{}})
	f.Integrate(t)
	run(t, b, "reload the log", chromedp.Navigate(base+"/ui/log"))
	wait(t, b, "the new checkpoint", `document.getElementById("checkpoint").textContent !== `+jsString(earlier)+` && document.getElementById("checkpoint").textContent.startsWith(`+jsString(evidencetest.Origin)+`)`)
	latest := eval[string](t, b, `document.getElementById("checkpoint").textContent`)
	br, _ = check("a checkpoint and the one kept", latest, "", earlier)
	if len(br) != 0 || !strings.Contains(eval[string](t, b, `document.getElementById("browser-steps").textContent`), "Consistency: the tree of size") {
		t.Fatalf("consistency: %v\n%s", br, eval[string](t, b, `document.getElementById("browser-steps").textContent`))
	}
	screenshot(t, b, "log-consistency")
	lines := strings.SplitN(earlier, "\n", 4)
	forged := lines[0] + "\n" + lines[1] + "\n" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" + "\n" + lines[3]
	br, _ = check("a forged checkpoint kept", latest, "", forged)
	if !slices.Contains(br, "checkpoint_signature_invalid") {
		t.Fatalf("forged earlier checkpoint: %v", br)
	}
}

// TestJourneyViewer: a viewer searches but gets no export, no bundle, no
// replay and no server check of a bundle.
func TestJourneyViewer(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, b := journey(t, f, web.RoleViewer)

	run(t, b, "search", chromedp.Navigate(base+"/ui/search?decision=deny"))
	wait(t, b, "the hits", `document.querySelectorAll("#entry-hits tbody tr").length === 2`)
	for expr, want := range map[string]bool{
		`document.getElementById("exports") === null`:             true,
		`document.querySelectorAll("a.bundle-link").length === 0`: true,
	} {
		if eval[bool](t, b, expr) != want {
			t.Errorf("viewer: %s is not %v", expr, want)
		}
	}
	if got := evalAwait[int](t, b, `fetch("/api/v1/search/export?format=csv").then(r => r.status)`); got != 403 {
		t.Errorf("viewer export: %d", got)
	}
	screenshot(t, b, "viewer-search")
	deny := f.Steps[1]
	run(t, b, "open the decision", chromedp.Navigate(base+"/ui/decisions/"+deny.RequestID+"?session_id="+deny.SessionID))
	wait(t, b, "the decision", `document.body.textContent.includes("deny")`)
	if eval[bool](t, b, `document.getElementById("replay-form") !== null || document.getElementById("export-section") !== null`) {
		t.Errorf("a viewer is offered replay or export\n%s", dom(b))
	}
	run(t, b, "open the session", chromedp.Navigate(base+"/ui/sessions/"+deny.SessionID))
	wait(t, b, "the timeline", `document.querySelectorAll("#entries tbody tr").length > 0`)
	if eval[bool](t, b, `document.getElementById("export-section") !== null`) {
		t.Error("a viewer is offered exports on the session page")
	}
}

// TestLayouts: every page fits 1280 and 390 px without scrolling
// sideways.
func TestLayouts(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, toks := journeyServer(t, f)
	b := browse(t)
	loginAs(t, b, base, toks[web.RoleAdmin], web.RoleAdmin)
	deny := f.Steps[1]
	pages := map[string]string{
		"sessions": "/ui/", "search": "/ui/search?decision=deny", "log": "/ui/log",
		"session":   "/ui/sessions/" + deny.SessionID,
		"decision":  "/ui/decisions/" + deny.RequestID + "?session_id=" + deny.SessionID,
		"dashboard": "/ui/dashboard",
	}
	names := []string{"sessions", "search", "log", "session", "decision", "dashboard"}
	for _, w := range []int64{1280, 390} {
		viewport(t, b, w)
		for _, name := range names {
			run(t, b, "open "+name, chromedp.Navigate(base+pages[name]))
			wait(t, b, name+" loaded", `document.getElementById("who") && document.getElementById("who").textContent !== "" && !/Loading|Searching|Verifying…/.test(document.body.textContent)`)
			if !eval[bool](t, b, `document.scrollingElement.scrollWidth <= innerWidth`) {
				t.Errorf("%s at %d px scrolls sideways: scrollWidth %d > %d", name, w,
					eval[int](t, b, `document.scrollingElement.scrollWidth`), eval[int](t, b, `innerWidth`))
			}
			if w == 390 && (name == "search" || name == "log") {
				screenshot(t, b, name+"-390")
			}
		}
	}
}

// TestHostileStrings: markup in an agent id, a tool name, arguments,
// reasoning, a source record and flags is shown as text everywhere it
// appears.
func TestHostileStrings(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, toks := journeyServer(t, f)
	const x = `<img src=x onerror="document.body.dataset.pwned=1">`
	// Through the Guardian: a tool name and arguments.
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{
		"tool":      map[string]any{"name": "tool" + x},
		"arguments": map[string]any{"cmd": map[string]any{"value": "args" + x, "provenance": map[string]any{"provenance_id": "p-hostile", "origin": "user_input"}}},
	})
	// Through the plain API, as ingest writes: agent id, reasoning, source
	// record, flags.
	entry := fmt.Sprintf(`{"entry_id":"h-1","step_id":"h-1","step_type":"bash-guard/decision","decision":{"disposition":"deny","reasoning":%s},"flags":[%s],"source_format":"bash-guard","source_record":%s}`,
		jsString("reasoning"+x), jsString("flag"+x), jsString("record"+x))
	req, _ := httpPost(base+"/api/v1/sessions/hostile-1/entries?agent_id="+urlQuery("agent"+x), toks[web.RoleAdmin], entry)
	if req != 201 {
		t.Fatalf("append: %d", req)
	}
	b := browse(t)
	viewport(t, b, 1280)
	loginAs(t, b, base, toks[web.RoleAdmin], web.RoleAdmin)
	for _, u := range []string{"/ui/search", "/ui/search?as=sessions", "/ui/", "/ui/sessions/hostile-1"} {
		run(t, b, "open "+u, chromedp.Navigate(base+u))
		wait(t, b, u+" loaded", `!/Loading|Searching/.test(document.body.textContent)`)
		time.Sleep(200 * time.Millisecond)
		if got := eval[string](t, b, `String(document.body.dataset.pwned)`); got != "undefined" {
			t.Fatalf("%s: the hostile markup ran", u)
		}
		if n := eval[int](t, b, `document.querySelectorAll("main img").length`); n != 0 {
			t.Errorf("%s: %d img elements made from data", u, n)
		}
	}
	run(t, b, "search", chromedp.Navigate(base+"/ui/search"))
	wait(t, b, "the hits", `document.querySelectorAll("#entry-hits tbody tr").length > 0`)
	text := eval[string](t, b, `document.getElementById("entry-hits").textContent`)
	for _, want := range []string{"tool" + x, "reasoning" + x, "flag" + x, "agent" + x} {
		if !strings.Contains(text, want) {
			t.Errorf("search results do not show %q as text", want)
		}
	}
	run(t, b, "the hostile session", chromedp.Navigate(base+"/ui/sessions/hostile-1"))
	wait(t, b, "its timeline", `document.querySelectorAll("#entries tbody tr").length === 1`)
	text = eval[string](t, b, `document.getElementById("entries").textContent`)
	for _, want := range []string{"reasoning" + x, "record" + x, "flag" + x} {
		if !strings.Contains(text, want) {
			t.Errorf("the timeline does not show %q as text:\n%s", want, text)
		}
	}
	run(t, b, "the Guardian session", chromedp.Navigate(base+"/ui/sessions/"+f.ECDSASession))
	wait(t, b, "its timeline", `document.getElementById("entries").textContent.includes("tool<img")`)
	if text := eval[string](t, b, `document.getElementById("entries").textContent`); !strings.Contains(text, "args<img") {
		t.Errorf("the arguments are not shown as text:\n%s", text)
	}
	if got := eval[string](t, b, `String(document.body.dataset.pwned)`); got != "undefined" {
		t.Fatal("the hostile markup ran")
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// httpPost posts body with a bearer token and returns the status.
func httpPost(u, token, body string) (int, error) {
	req, err := http.NewRequest("POST", u, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestJourneyIncident: from a denied step in the search, one click to the
// decision view; the replay lists the recorded versions, and under
// another one the rules that decided show on both sides.
func TestJourneyIncident(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	webtest.RecordPermissive(t, f.Store)
	base, b := journey(t, f, web.RoleAuditor)

	run(t, b, "search denied steps", chromedp.Navigate(base+"/ui/search?decision=deny"))
	wait(t, b, "the hits", `document.querySelectorAll("#entry-hits a.disp").length === 2`)
	run(t, b, "one click to the decision", chromedp.Click(`#entry-hits a.disp`))
	settle(t, b, `location.pathname`, "/ui/decisions/")
	wait(t, b, "the versions", `document.querySelectorAll("#version option").length === 2`)
	run(t, b, "replay under the permissive version", chromedp.SetValue("#version", webtest.PermissiveVersion), chromedp.Click("#replay"))
	wait(t, b, "the rules", `document.getElementById("rules") !== null`)
	cells := eval[[]string](t, b, `[...document.querySelectorAll("#rules tbody td")].map(c => c.textContent)`)
	if len(cells) != 2 || !strings.Contains(cells[0], "shell.pipe_remote_to_interpreter") || !strings.Contains(cells[1], "permit.all") {
		t.Errorf("rules: %q", cells)
	}
	if head := eval[string](t, b, `document.querySelector("#rules thead").textContent`); !strings.Contains(head, "Recorded: deny") || !strings.Contains(head, "Replayed: allow") {
		t.Errorf("rules head %q", head)
	}
	screenshot(t, b, "incident-replay")

	// From the timeline too: the denied step's decision is a link.
	deny := f.Steps[1]
	run(t, b, "the session", chromedp.Navigate(base+"/ui/sessions/"+deny.SessionID))
	wait(t, b, "the denied step", `document.querySelector("#entries a.decision-link .disp-deny") !== null`)
	screenshot(t, b, "timeline")
	run(t, b, "click the denial", chromedp.Click(`#entries a.decision-link .disp-deny`))
	settle(t, b, `location.pathname + location.search`, "/ui/decisions/"+deny.RequestID+"?session_id="+deny.SessionID)
}

// TestJourneyDashboard: the admin's integrity at a glance, as charts.
func TestJourneyDashboard(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, b := journey(t, f, web.RoleAdmin)
	run(t, b, "open the dashboard", chromedp.Navigate(base+"/ui/dashboard"))
	wait(t, b, "the tiles", `document.getElementById("tile-checkpoint") !== null && document.getElementById("tile-reverify") !== null`)
	if got := eval[string](t, b, `document.getElementById("tile-checkpoint").textContent`); !strings.Contains(got, "size ") || !strings.Contains(got, "ago") {
		t.Errorf("checkpoint tile %q", got)
	}
	// No witness policy: what is signed is published, and the fixture's
	// log is integrated, so publication does not lag.
	if got := eval[string](t, b, `(document.getElementById("tile-publication") || {}).textContent || ""`); !strings.Contains(got, "Published checkpoint lag") || !strings.Contains(got, "up to date") || !strings.Contains(got, "published as signed") {
		t.Errorf("publication tile %q", got)
	}
	// The ingest quarantine exists (migration 0007) and holds nothing.
	if got := eval[string](t, b, `(document.getElementById("tile-quarantine") || {}).textContent || ""`); !strings.Contains(got, "Quarantined ingest records") || !strings.HasSuffix(got, "none") {
		t.Errorf("quarantine tile %q, want none quarantined", got)
	}
	// The push sink's tile: how far behind, and why.
	wait(t, b, "the export tile", `document.getElementById("tile-export-siem") !== null`)
	if got := eval[string](t, b, `(document.getElementById("tile-export-siem") || {}).textContent || ""`); !strings.Contains(got, "Export siem3 behind") ||
		!strings.Contains(got, "61.0 s behind; 3 sent_unconfirmed (plain TCP: never confirmed), 2 in the resend window, 2 resent") || !strings.Contains(got, "Failing: export sink siem: couldn't connect") {
		t.Errorf("export tile %q", got)
	}
	// Today's bars: 6 entries, 2 denied.
	titles := eval[[]string](t, b, `[...document.querySelectorAll("#decision-chart rect title, #volume-chart rect title")].map(t => t.textContent)`)
	today := time.Now().UTC().Format(time.DateOnly)
	for _, want := range []string{today + ": 2 deny", today + ": 6 entries", today + ": 2 sessions"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no bar %q in %q", want, titles)
		}
	}
	run(t, b, "re-verify", chromedp.Click("#start"))
	// #last says "no run has finished" until one has: wait for a verdict.
	wait(t, b, "the run", `document.getElementById("last-verdict") !== null`)
	run(t, b, "reload", chromedp.Navigate(base+"/ui/dashboard"))
	wait(t, b, "the last run", `(document.getElementById("tile-reverify") || {textContent: ""}).textContent.includes("all verified")`)
	screenshot(t, b, "dashboard")
}

// TestJourneyDashboardReplica: with a read replica (serve --db-read) the
// admin's dashboard shows how stale it is and which store answers the
// compliance reads, as /stats reports its latest measurement; a server
// without one shows no replica tile.
func TestJourneyDashboardReplica(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	measured := time.Now().UTC()
	var mu sync.Mutex
	cur := web.ReplicaLag{Bytes: 17 << 10, Seconds: 40, StaleSeconds: 42.5, MaxLagSeconds: 30, MeasuredAt: measured,
		Replayed: "0/3000000", Primary: "0/3004400", ReadsFrom: "primary", ReadsReason: "over_max_lag"}
	lag := func() web.ReplicaLag {
		mu.Lock()
		defer mu.Unlock()
		return cur
	}
	set := func(l web.ReplicaLag) {
		mu.Lock()
		defer mu.Unlock()
		cur = l
	}
	base, toks := journeyServerWith(t, f, lag)
	b := browse(t)
	viewport(t, b, 1280)
	loginAs(t, b, base, toks[web.RoleAdmin], web.RoleAdmin)
	tile := func(state string, want ...string) {
		t.Helper()
		run(t, b, "open the dashboard "+state, chromedp.Navigate(base+"/ui/dashboard"))
		waitText(t, b, "#tile-replica", want[0])
		got := text(t, b, "#tile-replica")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("replica tile %s: %q, want %q in it", state, got, w)
			}
		}
	}
	warned := func() bool {
		return eval[bool](t, b, `document.getElementById("tile-replica").classList.contains("warn")`)
	}

	tile("over the limit", "Reads from the primary: staler than the 30 s limit", "Read replica lag", "42.5 s", "17 KiB of WAL behind")
	if !warned() {
		t.Error("the replica tile does not warn while reads go to the primary")
	}
	screenshot(t, b, "dashboard-replica")
	set(web.ReplicaLag{MaxLagSeconds: 30, MeasuredAt: measured, Replayed: "0/3004400", Primary: "0/3004400", ReadsFrom: "replica", ReadsReason: "within_max_lag"})
	tile("caught up", "Reads from the replica: within the 30 s limit", "caught up")
	if warned() {
		t.Error("the replica tile warns about a caught-up replica that serves the reads")
	}
	set(web.ReplicaLag{MaxLagSeconds: 30, MeasuredAt: measured, Problem: "unreachable", ReadsFrom: "primary", ReadsReason: "unreachable"})
	tile("unreachable", "Reads from the primary: replica unreachable", "unknown")

	plain, plainToks := journeyServer(t, evidencetest.New(t, "sqlite"))
	loginAs(t, b, plain, plainToks[web.RoleAdmin], web.RoleAdmin)
	run(t, b, "open the dashboard without a replica", chromedp.Navigate(plain+"/ui/dashboard"))
	// The tiles are drawn together from one /stats answer.
	wait(t, b, "the tiles", `document.getElementById("tile-checkpoint") !== null`)
	if eval[bool](t, b, `document.getElementById("tile-replica") !== null`) {
		t.Errorf("a replica tile without a read replica: %q", text(t, b, "#tile-replica"))
	}
}

// TestTimelineFolds: a subagent's steps fold under its start, and the
// timeline loads one page at a time.
func TestTimelineFolds(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, toks := journeyServer(t, f)
	types := []string{"steps/toolCallRequest", "steps/subagentStart", "steps/toolCallRequest", "steps/toolCallRequest", "steps/subagentStop"}
	for i := range 105 {
		typ := "steps/toolCallRequest"
		if i < len(types) {
			typ = types[i]
		}
		e := fmt.Sprintf(`{"entry_id":"e-%d","step_id":"s-%d","step_type":%q,"decision":"allow"}`, i, i, typ)
		if code, err := httpPost(base+"/api/v1/sessions/sub-1/entries?agent_id=agent-7", toks[web.RoleAdmin], e); err != nil || code != 201 {
			t.Fatalf("append %d: %d %v", i, code, err)
		}
	}
	b := browse(t)
	viewport(t, b, 1280)
	loginAs(t, b, base, toks[web.RoleAuditor], web.RoleAuditor)
	run(t, b, "the session", chromedp.Navigate(base+"/ui/sessions/sub-1"))
	wait(t, b, "the first page", `document.querySelectorAll("#entries tbody tr").length === 100`)
	if n := eval[int](t, b, `document.querySelectorAll("#entries tr[data-group]").length`); n != 3 {
		t.Errorf("%d rows in the subagent, want 3 (its two steps and its stop)", n)
	}
	run(t, b, "fold the subagent", chromedp.Click("#entries button.fold"))
	if n := eval[int](t, b, `[...document.querySelectorAll("#entries tbody tr")].filter(r => !r.hidden).length`); n != 97 {
		t.Errorf("%d rows shown after folding, want 97", n)
	}
	run(t, b, "the next page", chromedp.Click("#more"))
	wait(t, b, "all entries", `document.querySelectorAll("#entries tbody tr").length === 105`)
}

// TestBrowserCosignatures: witness cosignatures made by the Go signer
// (ledger/tlog) verify in the browser's own implementation: an Ed25519
// cosignature/v1 is checked, a byte changed in it is refused, and an
// ML-DSA-44 one is left to the server, as the page says.
func TestBrowserCosignatures(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, toks := journeyServer(t, f)
	cp, err := f.Log.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	text := string(cp[:strings.Index(string(cp), "\n\n")+1])
	cosign := func(name string, alg tlog.Algorithm) (line, vkey string) {
		skey, vkey, err := tlog.GenerateKey(rand.Reader, name, alg)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tlog.NewSigner(skey, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := s.Sign([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		id := binary.BigEndian.AppendUint32(nil, s.KeyHash())
		return "— " + name + " " + base64.StdEncoding.EncodeToString(append(id, sig...)) + "\n", vkey
	}
	good, goodKey := cosign("witness-a.test", tlog.CosignatureEd25519)
	pq, pqKey := cosign("witness-pq.test", tlog.CosignatureMLDSA44)
	bad, badKey := cosign("witness-b.test", tlog.CosignatureEd25519)
	raw, _ := base64.StdEncoding.DecodeString(strings.Fields(bad)[2])
	raw[len(raw)-1] ^= 1
	bad = "— witness-b.test " + base64.StdEncoding.EncodeToString(raw) + "\n"

	b := browse(t)
	viewport(t, b, 1280)
	loginAs(t, b, base, toks[web.RoleAuditor], web.RoleAuditor)
	run(t, b, "open the log", chromedp.Navigate(base+"/ui/log"))
	wait(t, b, "the keys", `document.getElementById("trusted").value !== ""`)
	run(t, b, "check the cosigned checkpoint", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`document.getElementById("input").value = %s; document.getElementById("trusted").value += "\n" + %s;`,
		jsString(string(cp)+good+pq+bad), jsString(strings.Join([]string{goodKey, pqKey, badKey}, "\n")))), chromedp.Click("#check"))
	wait(t, b, "the verdict", `/ (ok|bad|error)$/.test(document.getElementById("browser-verdict").className)`)
	steps := eval[string](t, b, `document.getElementById("browser-steps").textContent`)
	for _, want := range []string{
		"witness witness-a.test cosigned it",
		"witness witness-pq.test's ML-DSA-44 cosignature is left to the server",
		"witness witness-b.test's cosignature does not verify",
		"the log's signature by " + evidencetest.Origin + " verifies",
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("steps lack %q:\n%s", want, steps)
		}
	}
}
