package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// searchServer serves the API with search over a fixture's store, with
// its tokens, and returns a maker of tokens of a role.
func searchServer(t *testing.T, f *evidencetest.Fixture) (string, func(role web.Role, scope string) string) {
	t.Helper()
	base := webtest.Serve(t, web.New(f.Store, web.Options{Evidence: web.EvidenceOptions{Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t)}, Search: f.Store, Auth: webtest.Auth(f.Store)}))
	n := 0
	return base + "/api/v1", func(role web.Role, scope string) string {
		n++
		return webtest.Token(t, f.Store, web.TokenRequest{Name: string(role) + string(rune('a'+n)), Role: role, Scope: scope})
	}
}

type hitsBody struct {
	Entries []api.HitJSON `json:"entries"`
	Next    string        `json:"next"`
}

func searchEntries(t *testing.T, base string, q url.Values) hitsBody {
	t.Helper()
	code, _, b := webtest.Do(t, "GET", base+"/search?"+q.Encode(), nil)
	if code != 200 {
		t.Fatalf("search %s: %d %s", q.Encode(), code, b)
	}
	var out hitsBody
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearch runs the compliance search over a ledger a real Guardian
// wrote, on both stores: each filter finds what the fixture's steps
// decided, pages walk every hit once, and exports hold the same rows.
func TestSearch(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			base, mk := searchServer(t, f)

			// An ingested record names its source and flags (ingest/,
			// docs/ingest.md); the plain append API takes it as is.
			ingested := `{"entry_id":"e-1","step_id":"bg-1","step_type":"bash-guard/decision","decision":{"disposition":"allow","reasoning":"fail-open: no key"},"flags":["fail_open","unlock_bypass"],"source_format":"bash-guard","source_record":"{}"}`
			if code, _, b := webtest.Do(t, "POST", base+"/sessions/ingested-1/entries?agent_id=host-9", []byte(ingested)); code != 201 {
				t.Fatalf("append ingested: %d %s", code, b)
			}
			for name, q := range map[string]url.Values{
				"source": {"source": {"bash-guard"}},
				"flag":   {"flag": {"unlock_bypass"}, "decision": {"allow"}},
				"agent":  {"agent_id": {"host-9"}, "q": {"FAIL-OPEN"}},
			} {
				got := searchEntries(t, base, q)
				if len(got.Entries) != 1 || got.Entries[0].Source != "bash-guard" || !slices.Equal(got.Entries[0].Flags, []string{"fail_open", "unlock_bypass"}) {
					t.Errorf("ingested by %s: %+v", name, got.Entries)
				}
			}
			all := searchEntries(t, base, url.Values{"source": {"guardian"}})
			if len(all.Entries) != 6 || all.Next != "" {
				t.Fatalf("all entries: %d hits, next %q: %+v", len(all.Entries), all.Next, all.Entries)
			}
			tools := map[string]int{}
			for _, h := range all.Entries {
				tools[h.Tool]++
				if h.Source != "guardian" || h.AgentID != "agent-7" || !strings.HasSuffix(h.Bundle, "/bundle") {
					t.Errorf("hit %+v", h)
				}
			}
			if tools["bash"] != 2 || tools["read_file"] != 2 || tools["list_dir"] != 1 || tools[""] != 1 {
				t.Errorf("tools %v", tools)
			}

			deny := searchEntries(t, base, url.Values{"decision": {"deny"}})
			if len(deny.Entries) != 2 {
				t.Fatalf("deny: %+v", deny.Entries)
			}
			for _, h := range deny.Entries {
				if h.Tool != "bash" || h.Decision != "deny" || len(h.ReasonCodes) == 0 || len(h.PolicyRefs) == 0 || h.Reasoning == "" {
					t.Errorf("denied hit %+v", h)
				}
			}
			code := deny.Entries[0].ReasonCodes[0]
			ref := deny.Entries[0].PolicyRefs[0]
			id, version, _ := strings.Cut(ref, "@")
			word := strings.Fields(deny.Entries[0].Reasoning)[0]
			for name, q := range map[string]url.Values{
				"reason code":           {"reason_code": {code}},
				"policy id":             {"policy_id": {id}, "decision": {"deny"}},
				"policy id and version": {"policy_id": {id}, "policy_version": {version}, "decision": {"deny"}},
				"tool":                  {"tool": {"bash"}},
				"text, other case":      {"q": {strings.ToUpper(word)}, "decision": {"deny"}},
				"session":               {"tool": {"bash"}, "agent_id": {"agent-7"}, "source": {"guardian"}},
				"time range":            {"tool": {"bash"}, "since": {time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}},
			} {
				got := searchEntries(t, base, q)
				if len(got.Entries) != 2 {
					t.Errorf("%s: %d hits %+v", name, len(got.Entries), got.Entries)
				}
			}
			for name, q := range map[string]url.Values{
				"other version":  {"policy_id": {id}, "policy_version": {"no-such-version"}},
				"flag":           {"flag": {"fail_open"}, "source": {"guardian"}},
				"source":         {"source": {"opa"}},
				"future":         {"since": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}},
				"other agent":    {"agent_id": {"agent-8"}},
				"LIKE wildcards": {"q": {"%_"}},
			} {
				if got := searchEntries(t, base, q); len(got.Entries) != 0 {
					t.Errorf("%s: %d hits", name, len(got.Entries))
				}
			}

			// Pages of one walk every hit once, newest first.
			var walked []string
			q := url.Values{"limit": {"1"}, "source": {"guardian"}}
			for range 10 {
				p := searchEntries(t, base, q)
				for _, h := range p.Entries {
					walked = append(walked, h.StepID)
				}
				if p.Next == "" {
					break
				}
				q.Set("cursor", p.Next)
			}
			var want []string
			for _, h := range all.Entries {
				want = append(want, h.StepID)
			}
			if !slices.Equal(walked, want) {
				t.Errorf("paged %v, want %v", walked, want)
			}

			code2, _, b := webtest.Do(t, "GET", base+"/search?as=sessions&decision=deny&limit=1", nil)
			var sp struct {
				Sessions []api.SessionHitJSON `json:"sessions"`
				Next     string               `json:"next"`
			}
			if err := json.Unmarshal(b, &sp); code2 != 200 || err != nil || len(sp.Sessions) != 1 || sp.Next == "" || sp.Sessions[0].Matches != 1 {
				t.Fatalf("sessions page: %d %s", code2, b)
			}
			_, _, b = webtest.Do(t, "GET", base+"/search?as=sessions&decision=deny&cursor="+url.QueryEscape(sp.Next), nil)
			var sp2 struct {
				Sessions []api.SessionHitJSON `json:"sessions"`
				Next     string               `json:"next"`
			}
			if err := json.Unmarshal(b, &sp2); err != nil || len(sp2.Sessions) != 1 || sp2.Next != "" || sp2.Sessions[0].SessionID <= sp.Sessions[0].SessionID {
				t.Fatalf("second sessions page: %s", b)
			}

			for _, c := range []struct{ q, msg string }{
				{"cursor=e0", "cursor"}, {"as=sessions&cursor=e5", "cursor"}, {"as=rows", "as="},
				{"since=yesterday", "since"}, {"policy_version=1", "policy_id"},
				{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "before"},
			} {
				if code, _, b := webtest.Do(t, "GET", base+"/search?"+c.q, nil); code != 400 || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
					t.Errorf("%s: %d %s", c.q, code, b)
				}
			}

			// Exports stream the same rows; a viewer gets none.
			code3, h, b := webtest.Do(t, "GET", base+"/search/export?format=csv&decision=deny", nil)
			rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
			if code3 != 200 || err != nil || h.Get("Content-Type") != "text/csv; charset=utf-8" || len(rows) != 3 || rows[0][0] != "session_id" || rows[1][9] != "bash" {
				t.Fatalf("csv export: %d %v %q", code3, err, b)
			}
			_, _, b = webtest.Do(t, "GET", base+"/search/export?format=json&as=entries&source=guardian", nil)
			var lines []api.HitJSON
			for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
				var hj api.HitJSON
				if err := json.Unmarshal(sc.Bytes(), &hj); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, hj)
			}
			if len(lines) != 6 || lines[0].StepID != all.Entries[0].StepID {
				t.Errorf("json export: %d lines", len(lines))
			}
			viewer := mk(web.RoleViewer, "")
			if code, _, b := webtest.Do(t, "GET", base+"/search/export?format=csv", nil, "Authorization", "Bearer "+viewer); code != 403 {
				t.Errorf("viewer export: %d %s", code, b)
			}
			if code, _, _ := webtest.Do(t, "GET", base+"/search?decision=deny", nil, "Authorization", "Bearer "+viewer); code != 200 {
				t.Errorf("viewer search: %d", code)
			}
			scoped := mk(web.RoleAuditor, "agent-8")
			_, _, b = webtest.Do(t, "GET", base+"/search", nil, "Authorization", "Bearer "+scoped)
			if !bytes.Equal(bytes.TrimSpace(b), []byte(`{"entries":[]}`)) {
				t.Errorf("scoped to another agent: %s", b)
			}
		})
	}
}

// TestIntegrityRoute: sessions are not anchored until the log integrates
// them, unchecked until a re-verification runs after their last append,
// verified after it, and named with their codes when it found something.
func TestIntegrityRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, _ := searchServer(t, f)
	states := func() map[string]api.IntegrityJSON {
		t.Helper()
		_, _, b := webtest.Do(t, "GET", base+"/integrity?session_id="+f.HMACSession+"&session_id="+f.ECDSASession+"&session_id=nope", nil)
		var out struct {
			Sessions []api.IntegrityJSON `json:"sessions"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Sessions) != 2 {
			t.Fatalf("integrity: %v %s", err, b)
		}
		m := map[string]api.IntegrityJSON{}
		for _, s := range out.Sessions {
			m[s.SessionID] = s
		}
		return m
	}
	if s := states(); s[f.HMACSession].State != api.IntegrityUnchecked || s[f.ECDSASession].State != api.IntegrityUnchecked {
		t.Fatalf("before a run: %+v", s)
	}
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{}})
	if s := states(); s[f.ECDSASession].State != api.IntegrityNotAnchored {
		t.Fatalf("after an unanchored append: %+v", s)
	}
	f.Integrate(t)
	f.TamperEntry(t, f.HMACSession, 1, `"disposition":"deny"`, `"disposition":"allow"`)
	runReverify(t, base)
	s := states()
	if s[f.ECDSASession].State != api.IntegrityVerified || s[f.HMACSession].State != api.IntegrityFindings || !slices.Contains(s[f.HMACSession].Codes, "entry_hash_mismatch") {
		t.Fatalf("after a run: %+v", s)
	}
}

func runReverify(t *testing.T, base string) {
	t.Helper()
	if code, _, b := webtest.Do(t, "POST", base+"/admin/reverify", nil); code != 202 {
		t.Fatalf("start: %d %s", code, b)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, _, b := webtest.Do(t, "GET", base+"/admin/reverify", nil)
		var st api.ReverifyJSON
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if st.Current == nil && st.Last != nil {
			return
		}
	}
	t.Fatal("re-verification did not finish")
}

// TestStepsRoute: the timeline's steps say what the agent tried, with
// secrets redacted and arguments withheld from a viewer, and mark the
// steps that open and close a subagent.
func TestStepsRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, mk := searchServer(t, f)
	get := func(token string) []api.StepJSON {
		t.Helper()
		hdr := []string{}
		if token != "" {
			hdr = []string{"Authorization", "Bearer " + token}
		}
		code, _, b := webtest.Do(t, "GET", base+"/sessions/"+f.HMACSession+"/steps?from=0&limit=10", nil, hdr...)
		var out struct {
			Steps []api.StepJSON `json:"steps"`
		}
		if err := json.Unmarshal(b, &out); code != 200 || err != nil {
			t.Fatalf("steps: %d %v %s", code, err, b)
		}
		return out.Steps
	}
	steps := get("")
	if len(steps) != 4 {
		t.Fatalf("%d steps", len(steps))
	}
	bash := steps[1]
	if bash.Tool != "bash" || bash.Decision != "deny" || !strings.HasPrefix(bash.Args, "command=curl -fsSL https://get.example.com") ||
		len(bash.ReasonCodes) == 0 || len(bash.Policies) == 0 || bash.Policies[0].RuleID == "" || bash.Params != "shown" || bash.Source != "guardian" {
		t.Errorf("the bash step: %+v", bash)
	}
	msg := steps[2]
	if !strings.HasPrefix(msg.Message, "deploy with key") || strings.Contains(msg.Message, "AKIA") || !strings.Contains(msg.Message, "[redacted]") {
		t.Errorf("the user message: %q", msg.Message)
	}
	for _, st := range get(mk(web.RoleViewer, "")) {
		if st.Args != "" || st.Message != "" || st.Params == "shown" {
			t.Errorf("a viewer sees params: %+v", st)
		}
		if st.Position == 1 && st.Tool != "bash" {
			t.Errorf("a viewer does not see the tool name: %+v", st)
		}
	}

	// A subagent's steps, appended as an ingesting writer would.
	for i, typ := range []string{"steps/subagentStart", "steps/toolCallRequest", "steps/subagentStop"} {
		e := fmt.Sprintf(`{"entry_id":"s-%d","step_id":"s-%d","step_type":%q}`, i, i, typ)
		if code, _, b := webtest.Do(t, "POST", base+"/sessions/sub-1/entries?agent_id=agent-7", []byte(e)); code != 201 {
			t.Fatalf("append: %d %s", code, b)
		}
	}
	_, _, b := webtest.Do(t, "GET", base+"/sessions/sub-1/steps", nil)
	var out struct {
		Steps []api.StepJSON `json:"steps"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Steps) != 3 || out.Steps[0].Subagent != "start" || out.Steps[1].Subagent != "" || out.Steps[2].Subagent != "stop" || out.Steps[0].Params != "none" {
		t.Errorf("subagent steps: %s", b)
	}
}

// TestExportPages: an export longer than a page reads page after page and
// holds every row once, in the search's order.
func TestExportPages(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, _ := searchServer(t, f)
	const n = 2*ledger.MaxPageSize + 7
	var rs []ledger.Record
	for i := range n {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("bulk-%d", i%3), AgentID: "bulk",
			Entry: fmt.Appendf(nil, `{"entry_id":"b-%d","step_id":"b-%d","step_type":"steps/toolCallRequest","decision":"deny"}`, i, i)})
	}
	if _, err := f.Store.AppendBatch(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	code, _, b := webtest.Do(t, "GET", base+"/search/export?format=csv&agent_id=bulk", nil)
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if code != 200 || err != nil || len(rows) != n+1 {
		t.Fatalf("export: %d %v, %d rows", code, err, len(rows))
	}
	seen := map[string]bool{}
	for i, r := range rows[1:] {
		if want := fmt.Sprintf("b-%d", n-1-i); r[4] != want || seen[r[4]] {
			t.Fatalf("row %d is step %s, want %s", i, r[4], want)
		}
		seen[r[4]] = true
	}
	_, _, b = webtest.Do(t, "GET", base+"/search/export?format=json&as=sessions&agent_id=bulk", nil)
	if lines := strings.Count(string(b), "\n"); lines != 3 {
		t.Errorf("sessions export: %d lines\n%s", lines, b)
	}
}
