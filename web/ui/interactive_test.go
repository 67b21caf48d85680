package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/ui"
)

// The interactive tests drive the system's Chromium over the DevTools
// protocol (chromedp): they type, click and pick, and read the DOM the
// scripts built. Each runs against the real API and UI over a store a real
// Guardian wrote (evidencetest), on a loopback port.

const adminToken = "dashboard-test-token"

// hostileID is a request id and reason code carrying markup that would run
// if it reached the page as HTML.
const hostileID = `req-<img src=x onerror=document.body.dataset.pwned=1>`

// browse starts a headless Chromium for one test and returns a context
// bounded to 30 seconds for its actions.
func browse(t *testing.T) context.Context {
	t.Helper()
	bin := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()), chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	// The first run starts the browser; it must not carry the timeout,
	// which would stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(func() {
		cancelT()
		cancel()
		cancelAlloc()
	})
	return tctx
}

// serve serves the API and the UI over f's store, anchored in its log,
// with the bootstrap admin token token. The browser logs in with login.
func serve(t *testing.T, f *evidencetest.Fixture, token string) string {
	t.Helper()
	return serveWith(t, f, token, nil, nil)
}

// serveWith is serve with the re-verification run by rv (nil: the
// server's own) and every request's path noted in reqs (when not nil).
func serveWith(t *testing.T, f *evidencetest.Fixture, token string, rv *evidence.Reverifier, reqs *requests) string {
	t.Helper()
	h := web.New(f.Store, web.Options{Evidence: web.EvidenceOptions{
		Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t), Reverifier: rv,
	}, Auth: web.AuthOptions{Bootstrap: token, NoAccessLog: true}})
	ui.Mount(h.Router())
	var hh http.Handler = h
	if reqs != nil {
		hh = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reqs.note(r.Method + " " + r.URL.Path)
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(hh)
	t.Cleanup(srv.Close)
	return srv.URL
}

// requests are the requests a server answered, as "METHOD path".
type requests struct {
	mu   sync.Mutex
	seen []string
}

func (r *requests) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

// take returns the requests noted since the last take.
func (r *requests) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// gatedStore is a real store that holds a re-verification run when it
// reaches session at, until open: the test can then see the run's
// progress however fast the run is.
type gatedStore struct {
	evidence.Store
	at      string
	reached chan struct{} // closed when the run reaches at
	release chan struct{}
	hold    sync.Once
	opened  sync.Once
}

func newGate(st evidence.Store, at string) *gatedStore {
	return &gatedStore{Store: st, at: at, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStore) Session(ctx context.Context, id string) (ledger.Session, error) {
	if id == g.at {
		g.hold.Do(func() {
			close(g.reached)
			<-g.release
		})
	}
	return g.Store.Session(ctx, id)
}

func (g *gatedStore) open() { g.opened.Do(func() { close(g.release) }) }

// login logs the browser in at base with token through the login page.
func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "log in", chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token), chromedp.Click("#login-button"))
	settle(t, ctx, `(document.getElementById("who") || {textContent: ""}).textContent`, "(admin)")
}

// settle waits, across the navigations a form post causes, until expr
// (a string) contains want.
func settle(t *testing.T, ctx context.Context, expr, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err == nil && strings.Contains(v, want) {
			return
		}
		got = v
	}
	t.Fatalf("%s is %q, want it to contain %q\n%s", expr, got, want, dom(ctx))
}

// run runs browser actions, failing the test with what it was doing.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, dom(ctx))
	}
}

// text returns the text content of the element sel ("" when absent).
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitText waits until the text of sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.includes(%q)`, sel, want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("waiting for %s to say %q: %v\n%s now says %q", sel, want, err, sel, text(t, ctx, sel))
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// dom is the page's markup for failure messages.
func dom(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.OuterHTML("html"))
	if err != nil {
		return "(no DOM: " + err.Error() + ")"
	}
	return s
}

func TestDashboard(t *testing.T) {
	chromium(t)
	f := evidencetest.New(t, "sqlite")
	ctx := context.Background()
	// Two more sessions, written without the Guardian and anchored too:
	// four sessions in all. No signed response confirms their heads, so
	// they fail with entry_without_response.
	for i := range 2 {
		sid := fmt.Sprintf("extra-%d", i)
		if _, err := f.Store.Append(ctx, ledger.Record{SessionID: sid, AgentID: "agent-9", Entry: entry(i, fmt.Sprintf("extra-req-%d", i), "steps/toolCallRequest", "ALLOW")}); err != nil {
			t.Fatal(err)
		}
	}
	f.Integrate(t)
	// The ECDSA session's DENY (position 1) is rewritten into an ALLOW.
	f.TamperEntry(t, f.ECDSASession, 1, `"disposition":"deny"`, `"disposition":"allow"`)
	// The run stops at the ECDSA session, the second, until the test has
	// seen its progress.
	gate := newGate(f.Store, f.ECDSASession)
	t.Cleanup(gate.open)
	var reqs requests
	base := serveWith(t, f, adminToken, evidence.NewReverifier(gate, f.Log, f.Options(), f.Trust(t), nil, nil), &reqs)
	b := browse(t)

	login(t, b, base, adminToken)
	run(t, b, "open the dashboard", chromedp.Navigate(base+"/ui/dashboard"))
	waitText(t, b, "#totals", "Sessions4")
	if got := text(t, b, "#totals"); !strings.Contains(got, "Entries8") || !strings.Contains(got, "Policy bundle versions1") {
		t.Errorf("totals: %q, want 4 sessions, 8 entries, 1 policy version", got)
	}
	// A fifth session, of 12 steps without responses, written after the
	// page counted four: the run's total (5) is not the page's, and the
	// run keeps 10 of its 12 findings.
	const many = 12
	for i := range many {
		if _, err := f.Store.Append(ctx, ledger.Record{SessionID: "extra-2", AgentID: "agent-9", Entry: entry(10+i, fmt.Sprintf("extra-2-req-%d", i), "steps/toolCallRequest", "ALLOW")}); err != nil {
			t.Fatal(err)
		}
	}
	f.Integrate(t)

	t.Run("run", func(t *testing.T) {
		waitText(t, b, "#last", "No whole-ledger re-verification has finished")
		if got := eval[bool](t, b, `document.getElementById("auth").hidden && !document.getElementById("start").disabled`); !got {
			t.Fatalf("the admin session was not accepted: %q", text(t, b, "#auth"))
		}
		// The token is nowhere in the page, and the session cookie is
		// out of the scripts' reach (HttpOnly).
		if got := eval[string](t, b, `location.href + "|" + document.cookie + "|" + localStorage.length + "|" + sessionStorage.length`); strings.Contains(got, adminToken) || !strings.HasSuffix(got, "||0|0") {
			t.Errorf("the token leaked: href|cookie|localStorage|sessionStorage = %q", got)
		}

		reqs.take()
		run(t, b, "start", chromedp.Click("#start"))
		select {
		case <-gate.reached:
		case <-time.After(10 * time.Second):
			t.Fatal("the run never reached the second session")
		}
		// The progress is the run's: one session checked of the five it
		// counted when it started.
		waitText(t, b, "#running-text", "1 of 5 sessions checked")
		if got := eval[[]float64](t, b, `[document.getElementById("progress").max, document.getElementById("progress").value]`); len(got) != 2 || got[0] != 5 || got[1] != 1 {
			t.Errorf("progress [max, value] = %v, want [5, 1]", got)
		}
		gate.open()
		waitText(t, b, "#last-verdict", "4 of 5 sessions did not verify")
		if eval[bool](t, b, `document.getElementById("running").hidden`) == false {
			t.Error("the progress is still shown after the run finished")
		}
		sum := text(t, b, "#last-summary")
		for _, w := range []string{"Sessions at start5", "Sessions checked5", "Entries checked20", "Sessions with findings4", "Finished20", "Took"} {
			if !strings.Contains(sum, w) {
				t.Errorf("run summary %q lacks %q", sum, w)
			}
		}
		failed := eval[[][]string](t, b, `[...document.querySelectorAll("#failed-sessions tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
		codes := map[string][]string{}
		for _, r := range failed {
			codes[r[0]] = r[1:]
		}
		if len(failed) != 4 || len(codes[f.ECDSASession]) != 2 || !strings.Contains(codes[f.ECDSASession][0], "entry_hash_mismatch") ||
			fmt.Sprint(codes["extra-0"]) != "[entry_without_response 1]" || fmt.Sprint(codes["extra-1"]) != "[entry_without_response 1]" ||
			fmt.Sprint(codes["extra-2"]) != "[entry_without_response 12]" {
			t.Errorf("failing sessions %q: want %s with entry_hash_mismatch, extra-0 and extra-1 with one entry_without_response, extra-2 with 12", failed, f.ECDSASession)
		}
		if _, ok := codes[f.HMACSession]; ok {
			t.Errorf("the untouched session %s is listed as failing", f.HMACSession)
		}
		checkRunFindings(t, b, f)
		if !eval[bool](t, b, `!document.getElementById("start").disabled`) {
			t.Error("Start stays disabled after the run")
		}
		// The findings came with the run's status: the page verified no
		// session itself.
		for _, r := range reqs.take() {
			if strings.HasSuffix(r, "/verify") {
				t.Errorf("the dashboard asked %s", r)
			}
		}
	})

	t.Run("after a reload", func(t *testing.T) {
		// The rewritten entry is put back: the session verifies now, but
		// the run's findings are what the run saw.
		f.TamperEntry(t, f.ECDSASession, 1, `"disposition":"allow"`, `"disposition":"deny"`)
		if rep, err := evidence.Verify(ctx, f.Store, f.Log, f.ECDSASession, f.Options(), f.Trust(t)); err != nil || !rep.Verified() {
			t.Fatalf("the repaired session does not verify: %v %+v", err, rep)
		}
		// The login survives a reload (the session cookie).
		run(t, b, "reload", chromedp.Reload())
		waitText(t, b, "#totals", "Sessions5")
		waitText(t, b, "#last-verdict", "4 of 5 sessions did not verify")
		checkRunFindings(t, b, f)
	})
}

// checkRunFindings checks the findings table of TestDashboard's run: the
// code, session, entry and message of each finding the run kept, 10 of
// extra-2's 12 and a row saying so.
func checkRunFindings(t *testing.T, b context.Context, f *evidencetest.Fixture) {
	t.Helper()
	rows := eval[[][]string](t, b, `[...document.querySelectorAll("#run-findings tbody tr:not(.more)")].map(r => [...r.cells].map(c => c.textContent))`)
	bySession := map[string][][]string{}
	for _, r := range rows {
		if len(r) != 4 || r[3] == "" {
			t.Errorf("finding row %q: want code, session, entry and a message", r)
			continue
		}
		bySession[r[1]] = append(bySession[r[1]], r)
	}
	if got := bySession[f.ECDSASession]; len(got) == 0 || got[0][0] != "entry_hash_mismatch" || got[0][2] != "1" || !strings.Contains(got[0][3], "not to its stated entry_hash") {
		t.Errorf("findings of %s: %q; want first entry_hash_mismatch at entry 1 saying the content no longer hashes to it", f.ECDSASession, got)
	}
	for _, sid := range []string{"extra-0", "extra-1"} {
		if got := bySession[sid]; len(got) != 1 || got[0][0] != "entry_without_response" || got[0][2] != "0" || !strings.Contains(got[0][3], "No signed response publishes the head") {
			t.Errorf("findings of %s: %q; want one entry_without_response at entry 0", sid, got)
		}
	}
	got := bySession["extra-2"]
	if len(got) != evidence.MaxFindingsPerSession {
		t.Errorf("extra-2 shows %d findings, want the %d the run kept", len(got), evidence.MaxFindingsPerSession)
	}
	for i, r := range got {
		if r[0] != "entry_without_response" || r[2] != fmt.Sprint(i) {
			t.Errorf("extra-2 finding %d: %q", i, r)
		}
	}
	if _, ok := bySession[f.HMACSession]; ok {
		t.Errorf("findings of the untouched session %s: %q", f.HMACSession, bySession[f.HMACSession])
	}
	more := eval[[]string](t, b, `[...document.querySelectorAll("#run-findings tbody tr.more")].map(r => r.textContent)`)
	if len(more) != 1 || !strings.Contains(more[0], "2 more findings of extra-2") || !strings.Contains(more[0], "12 in all") {
		t.Errorf("the rows saying what was not kept: %q; want one for extra-2's 2 more of 12", more)
	}
}

func TestDecisionView(t *testing.T) {
	chromium(t)
	f := evidencetest.New(t, "sqlite")
	webtest.RecordPermissive(t, f.Store)
	// A step whose request id, reason code and rule id carry markup; it
	// was written without params, so it cannot be replayed.
	hostile := fmt.Appendf(nil, `{"entry_id":"9e1f0001-5c1d-4e2a-8b6f-00003a7c00d0","step_id":%q,"step_type":"steps/toolCallRequest",`+
		`"timestamp":"2026-03-14T14:02:01.000Z","request_hash":"5b8b6336ec4634d5d69f3a2007aa6f483d1e23f1d68b2b29acad7ad024448b7e",`+
		`"decision":{"disposition":"deny","reason_codes":[%q],"policy_references":[{"policy_id":%q,"policy_version":%q,"rule_id":%q}]}}`,
		hostileID, hostileID, policy.BaselineID, policy.BaselineVersion, hostileID)
	if _, err := f.Store.Append(context.Background(), ledger.Record{SessionID: "hostile", AgentID: "agent-9", Entry: hostile}); err != nil {
		t.Fatal(err)
	}
	base := serve(t, f, adminToken)
	b := browse(t)
	login(t, b, base, adminToken)
	deny := f.Step(t, "steps/toolCallRequest", "deny")

	t.Run("from the timeline", func(t *testing.T) {
		run(t, b, "open the session", chromedp.Navigate(base+"/ui/sessions/"+deny.SessionID))
		link := fmt.Sprintf(`a[href="/ui/decisions/%s?session_id=%s"]`, deny.RequestID, deny.SessionID)
		run(t, b, "follow the step link", chromedp.WaitVisible(link))
		if _, err := chromedp.RunResponse(b, chromedp.Click(link)); err != nil {
			t.Fatalf("click %s: %v", link, err)
		}
		if got := eval[string](t, b, `location.pathname + location.search`); got != "/ui/decisions/"+deny.RequestID+"?session_id="+deny.SessionID {
			t.Errorf("the step link led to %s", got)
		}
	})

	t.Run("recorded", func(t *testing.T) {
		waitText(t, b, "#replay-section", "Replay")
		waitText(t, b, "#version", webtest.PermissiveVersion)
		if got := text(t, b, "#request-id"); got != deny.RequestID {
			t.Errorf("request id %q", got)
		}
		step := text(t, b, "#step")
		for _, w := range []string{"Step typesteps/toolCallRequest", "Session" + deny.SessionID, "Position1", "Entry hash"} {
			if !strings.Contains(step, w) {
				t.Errorf("step %q lacks %q", step, w)
			}
		}
		if got := text(t, b, "#disposition"); got != "deny" {
			t.Errorf("disposition %q, want deny", got)
		}
		if got := text(t, b, "#reason-codes"); got != "remote_code_execution" {
			t.Errorf("reason codes %q", got)
		}
		if got := text(t, b, "#decision"); !strings.Contains(got, "signed response") {
			t.Errorf("decision source not said: %q", got)
		}
		refs := eval[[][]string](t, b, `[...document.querySelectorAll("#refs tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
		if len(refs) != 1 || refs[0][0] != policy.BaselineID || refs[0][1] != policy.BaselineVersion || refs[0][2] != "shell.pipe_remote_to_interpreter" {
			t.Errorf("policy references %q", refs)
		}
		opts := eval[[][]string](t, b, `[...document.querySelectorAll("#version option")].map(o => [o.value, o.textContent])`)
		if len(opts) != 2 || opts[0][0] != "" || opts[0][1] != policy.BaselineVersion+" (recorded)" || opts[1][0] != webtest.PermissiveVersion {
			t.Errorf("version options %q", opts)
		}
	})

	t.Run("replay as recorded", func(t *testing.T) {
		run(t, b, "replay", chromedp.Click("#replay"))
		waitText(t, b, "#replay-verdict", "Same decision")
		if got := text(t, b, "#replay-verdict"); !strings.Contains(got, "deny under "+policy.BaselineID+" "+policy.BaselineVersion) {
			t.Errorf("verdict %q", got)
		}
		if eval[bool](t, b, `document.getElementById("diff") !== null`) {
			t.Error("a diff beside the same decision")
		}
	})

	t.Run("replay under another version", func(t *testing.T) {
		run(t, b, "pick the permissive version and replay", chromedp.SetValue("#version", webtest.PermissiveVersion), chromedp.Click("#replay"))
		waitText(t, b, "#replay-verdict", "Different decision")
		if got := text(t, b, "#replay-verdict"); !strings.Contains(got, "allow under "+policy.BaselineID+" "+webtest.PermissiveVersion) || !strings.Contains(got, "recorded deny") {
			t.Errorf("verdict %q", got)
		}
		rows := eval[[][]string](t, b, `[...document.querySelectorAll("#diff tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
		byField := map[string][]string{}
		for _, r := range rows {
			byField[r[0]] = r
		}
		if r := byField["decision"]; len(r) != 3 || r[1] != `"deny"` || r[2] != `"allow"` {
			t.Errorf("diff rows %q lack decision \"deny\" -> \"allow\"", rows)
		}
		if r := byField["reason_codes"]; len(r) != 3 || r[1] != `["remote_code_execution"]` || r[2] != "—" {
			t.Errorf("diff rows %q lack reason_codes", rows)
		}
		if r := byField["policy_references"]; len(r) != 3 || !strings.Contains(r[2], webtest.PermissiveVersion) || !strings.Contains(r[2], "permit.all") {
			t.Errorf("diff rows %q lack policy_references", rows)
		}
	})

	t.Run("modifications", func(t *testing.T) {
		mod := f.Step(t, "steps/userMessage", "modify")
		run(t, b, "open the modify decision", chromedp.Navigate(base+"/ui/decisions/"+mod.RequestID))
		waitText(t, b, "#disposition", "modify")
		waitText(t, b, "#modifications-json", "[REDACTED")
		if eval[bool](t, b, `document.getElementById("modifications").hidden`) {
			t.Error("modifications hidden")
		}
	})

	t.Run("hostile", func(t *testing.T) {
		u := base + "/ui/decisions/" + url.PathEscape(hostileID) + "?session_id=hostile"
		run(t, b, "open the hostile decision", chromedp.Navigate(u))
		waitText(t, b, "#replay-section", "Replay")
		// The page asks who is logged in before it loads the decision.
		waitText(t, b, "#decision", "Reason codes")
		if got := text(t, b, "#request-id"); got != hostileID {
			t.Errorf("request id shown as %q", got)
		}
		if got := text(t, b, "#reason-codes"); got != hostileID {
			t.Errorf("reason code shown as %q", got)
		}
		if got := text(t, b, "#refs tbody"); !strings.Contains(got, hostileID) {
			t.Errorf("rule id shown as %q", got)
		}
		run(t, b, "replay it", chromedp.Click("#replay"))
		waitText(t, b, "#replay-result", "Replay failed: ")
		if got := text(t, b, "#replay-result"); !strings.Contains(got, "params are required") {
			t.Errorf("replay error %q", got)
		}
		if n := eval[int](t, b, `document.querySelectorAll("img").length`); n != 0 {
			t.Errorf("%d <img> elements from data", n)
		}
		if got := eval[string](t, b, `String(document.body.dataset.pwned)`); got != "undefined" {
			t.Errorf("the hostile markup ran: pwned=%s", got)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		run(t, b, "open an unknown decision", chromedp.Navigate(base+"/ui/decisions/no-such-request"))
		waitText(t, b, "#status", "Could not load the decision: ")
		if got := text(t, b, "#status"); !strings.Contains(got, "no-such-request") {
			t.Errorf("status %q", got)
		}
	})
}
