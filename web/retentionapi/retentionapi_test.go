package retentionapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRoutes drives the admin routes over real HTTP on both stores:
// non-admins are refused, bad input is refused naming the field, and a
// hold keeps an erasure request off its session.
func TestRoutes(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			svc := retention.New(f.Store, retention.Options{})
			base := webtest.Serve(t, web.New(f.Store, web.Options{Auth: webtest.Auth(f.Store),
				Retention: web.RetentionOptions{Reader: f.Store, Admin: svc, Eraser: svc}})) + "/api/v1"

			routes := []struct{ method, path, body string }{
				{"GET", "/admin/retention", ""},
				{"GET", "/admin/retention/rules", ""},
				{"PUT", "/admin/retention/rules/r", `{"period":"180d","reason":"x"}`},
				{"DELETE", "/admin/retention/rules/r", ""},
				{"POST", "/admin/retention/sweep", ""},
				{"GET", "/admin/holds", ""},
				{"POST", "/admin/holds", `{"case":"c","scope":{"agent_prefix":"a"},"reason":"x"}`},
				{"POST", "/admin/holds/c/release", `{"reason":"x"}`},
				{"POST", "/admin/erasures", `{"agent_prefix":"a","until":"2026-01-01T00:00:00Z","reason":"x"}`},
			}
			for _, role := range []access.Role{access.RoleAuditor, access.RoleViewer, access.RoleWriter, access.RoleMetrics} {
				tok := webtest.Token(t, f.Store, access.TokenRequest{Name: string(role), Role: role})
				for _, rt := range routes {
					code, _, b := webtest.Do(t, rt.method, base+rt.path, []byte(rt.body), "Authorization", "Bearer "+tok)
					if code != http.StatusForbidden || !strings.Contains(string(b), "wrong_role") {
						t.Errorf("%s %s as %s: %d %s", rt.method, rt.path, role, code, b)
					}
				}
			}
			if rs, _ := f.Store.Rules(ctx); len(rs) != 0 {
				t.Fatalf("a non-admin wrote rules: %+v", rs)
			}
			// The admin sessions are the server's own.
			forged := []byte(`{"entry_id":"e-1","step_id":"s-1","step_type":"acsledger/retention-sweep"}`)
			for _, p := range []string{"/sessions/" + retention.SessionID(time.Now().Add(24*time.Hour)) + "/entries", "/sessions/x/entries?agent_id=" + retention.AgentID} {
				if code, _, b := webtest.Do(t, "POST", base+p, forged); code != http.StatusForbidden || !strings.Contains(string(b), retention.AgentID) {
					t.Errorf("forged admin record %s: %d %s", p, code, b)
				}
			}

			for _, c := range []struct{ method, path, body, field string }{
				{"PUT", "/admin/retention/rules/r", `{"period":"12h","reason":"x"}`, "period"},
				{"PUT", "/admin/retention/rules/r", `{"period":"30d","reason":""}`, "reason"},
				{"PUT", "/admin/retention/rules/r", `{"period":"30d","reason":"x","scope":{"tenant":"t"}}`, "scope.tenant"},
				{"PUT", "/admin/retention/rules/r", `{"period":"30d","reason":"x","scope":{"source_format":"syslog"}}`, "scope.source_format"},
				{"PUT", "/admin/retention/rules/r", `{"period":"30d","reason":"x","reason":"y"}`, "reason"},
				{"POST", "/admin/holds", `{"case":"c","scope":{"agent_prefix":"a"},"reason":" "}`, "reason"},
				{"POST", "/admin/holds", `{"case":"c","scope":{"team":"a"},"reason":"x"}`, "scope.team"},
				{"POST", "/admin/holds", `{"case":"c","scope":{"from":"2026-03-02T00:00:00Z","until":"2026-03-01T00:00:00Z"},"reason":"x"}`, "scope.until"},
				{"POST", "/admin/holds", `{"case":"c","reason":"x"}`, "scope"},
				{"POST", "/admin/erasures", `{"agent_prefix":"a","until":"2026-01-01T00:00:00Z","reason":""}`, "reason"},
				{"POST", "/admin/erasures", `{"until":"2026-01-01T00:00:00Z","reason":"x"}`, "agent_prefix"},
			} {
				code, _, b := webtest.Do(t, c.method, base+c.path, []byte(c.body))
				if code != http.StatusBadRequest || !strings.HasPrefix(webtest.ErrorText(t, b), c.field+": ") {
					t.Errorf("%s %s: %d %s; want 400 naming %s", c.method, c.body, code, b, c.field)
				}
			}
			if hs, _ := f.Store.Holds(ctx, true); len(hs) != 0 {
				t.Fatalf("bad input wrote holds: %+v", hs)
			}

			if code, _, b := webtest.Do(t, "PUT", base+"/admin/retention/rules/keep-180", []byte(`{"period":"180d","reason":"EU AI Act art. 26(6)","scope":{"agent_prefix":"agent-"}}`)); code != 200 || !strings.Contains(string(b), `"period":"180d"`) {
				t.Fatalf("set rule: %d %s", code, b)
			}
			code, _, b := webtest.Do(t, "POST", base+"/admin/holds", []byte(`{"case":"case-9","scope":{"sessions":["`+f.HMACSession+`"]},"reason":"litigation"}`))
			if code != http.StatusCreated {
				t.Fatalf("set hold: %d %s", code, b)
			}
			if code, _, b := webtest.Do(t, "POST", base+"/admin/holds", []byte(`{"case":"case-9","scope":{"agent_prefix":"x"},"reason":"again"}`)); code != http.StatusConflict {
				t.Fatalf("second standing hold: %d %s", code, b)
			}
			var st struct {
				StandingHolds int64      `json:"standing_holds"`
				NextExpiry    *time.Time `json:"next_expiry"`
				Running       string     `json:"running"`
				Rules         []any      `json:"rules"`
			}
			status := func() {
				t.Helper()
				code, _, b := webtest.Do(t, "GET", base+"/admin/retention", nil)
				if code != 200 {
					t.Fatalf("status: %d %s", code, b)
				}
				st.Running = ""
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
			}
			status()
			if st.StandingHolds != 1 || st.NextExpiry == nil || st.NextExpiry.Before(time.Now().Add(179*24*time.Hour)) || len(st.Rules) != 1 {
				t.Fatalf("status: %+v", st)
			}

			// An erasure request of every agent- payload until now: the
			// held session keeps its params, the other loses them.
			code, _, b = webtest.Do(t, "POST", base+"/admin/erasures", []byte(`{"agent_prefix":"agent-","until":"`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339)+`","reason":"data subject request 42"}`))
			if code != http.StatusAccepted {
				t.Fatalf("erasure request: %d %s", code, b)
			}
			for deadline := time.Now().Add(30 * time.Second); ; {
				status()
				if st.Running == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the erasure request did not finish in 30s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			stored := func(session string) (n int) {
				for e, err := range ledger.AllEntries(ctx, f.Store, session) {
					if err != nil {
						t.Fatal(err)
					}
					if _, err := f.Store.Request(ctx, session, e.Position); err == nil {
						n++
					} else if !errors.Is(err, ledger.ErrErased) && !errors.Is(err, ledger.ErrNotFound) {
						t.Fatal(err)
					}
				}
				return n
			}
			if stored(f.HMACSession) == 0 || stored(f.ECDSASession) != 0 {
				t.Fatalf("after the request: held session %d params, other %d", stored(f.HMACSession), stored(f.ECDSASession))
			}

			code, _, b = webtest.Do(t, "POST", base+"/admin/holds/case-9/release", []byte(`{"reason":"settled"}`))
			if code != 200 || !strings.Contains(string(b), `"released_at"`) {
				t.Fatalf("release: %d %s", code, b)
			}
			code, _, b = webtest.Do(t, "GET", base+"/admin/holds?all=true", nil)
			if code != 200 || !strings.Contains(string(b), `"release_reason":"settled"`) {
				t.Fatalf("holds: %d %s", code, b)
			}
			if code, _, b := webtest.Do(t, "DELETE", base+"/admin/retention/rules/keep-180", nil); code != 200 {
				t.Fatalf("delete rule: %d %s", code, b)
			}
			if code, _, _ := webtest.Do(t, "DELETE", base+"/admin/retention/rules/keep-180", nil); code != 404 {
				t.Fatalf("delete a deleted rule: %d", code)
			}
		})
	}
}
