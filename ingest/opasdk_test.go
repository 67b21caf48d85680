package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/sdk"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web"
)

// authzPolicy calls time.now_ns, so OPA records it in nd_builtin_cache: an
// integer above 2^53.
const authzPolicy = `package authz

default allow := false

allow if {
	input.user == "alice"
	time.now_ns() > 0
}
`

// bundleServer serves one bundle, revision rev, as OPA's bundle plugin
// downloads it.
func bundleServer(t *testing.T, rev string) *httptest.Server {
	t.Helper()
	var buf bytes.Buffer
	b := bundle.Bundle{
		Manifest: bundle.Manifest{Revision: rev, Roots: &[]string{"authz"}},
		Modules:  []bundle.ModuleFile{{URL: "/authz.rego", Path: "/authz.rego", Raw: []byte(authzPolicy)}},
		Data:     map[string]any{},
	}
	if err := bundle.Write(&buf, b); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bundles/authz.tar.gz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startOPA runs OPA in-process through its SDK, configured as a stock
// OPA would be to ship its decision logs to acsledger at ledgerURL, with
// the upload triggered by the test.
func startOPA(t *testing.T, ledgerURL, token, bundleURL, id string) *sdk.OPA {
	t.Helper()
	config := fmt.Sprintf(`{
  "services": {
    "acsledger": {"url": %q, "credentials": {"bearer": {"token": %q}}},
    "bundles": {"url": %q}
  },
  "bundles": {"authz": {"service": "bundles", "resource": "/bundles/authz.tar.gz"}},
  "decision_logs": {"service": "acsledger", "nd_builtin_cache": true, "reporting": {"trigger": "manual"}}
}`, ledgerURL+"/api/v1/ingest/opa", token, bundleURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opa, err := sdk.New(ctx, sdk.Options{ID: id, Config: strings.NewReader(config)})
	if err != nil {
		t.Fatalf("sdk.New: %v", err)
	}
	t.Cleanup(func() { opa.Stop(context.Background()) })
	return opa
}

// flushDecisionLogs makes OPA upload what it buffered, as its periodic
// reporter would.
func flushDecisionLogs(t *testing.T, opa *sdk.OPA) {
	t.Helper()
	p, ok := opa.Plugin(logs.Name).(*logs.Plugin)
	if !ok {
		t.Fatal("OPA runs no decision-log plugin")
	}
	if err := p.Trigger(context.Background()); err != nil {
		t.Fatalf("decision-log upload: %v", err)
	}
}

// TestOPAThroughSDK: a real OPA (its SDK, in-process) decides, and its
// decision-log plugin uploads gzip arrays over loopback to the ledger's
// HTTP API; the decisions end in verified, anchored sessions.
func TestOPAThroughSDK(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			// OPA sends a writer token as its service config says
			// (credentials.bearer), as a deployment would.
			token, _, err := web.CreateToken(ctx, f.Store, web.TokenRequest{Name: "opa", Role: web.RoleWriter}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: web.AuthOptions{Tokens: f.Store, NoAccessLog: true}, Ingest: web.IngestOptions{Store: f.Store}}))
			t.Cleanup(srv.Close)
			opa := startOPA(t, srv.URL, token, bundleServer(t, "rev-42").URL, "opa-sdk-1")

			var ids []string
			for i := range 25 {
				in := map[string]any{"user": []string{"alice", "bob"}[i%2], "session_id": "sess-sdk"}
				if i%5 == 4 {
					delete(in, "session_id")
				}
				// A stock OPA server fills the cache when decision_logs.
				// nd_builtin_cache is on; through the SDK the caller passes it.
				res, err := opa.Decision(ctx, sdk.DecisionOptions{Path: "/authz/allow", Input: in, NDBCache: builtins.NDBCache{}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
			}
			// An undefined decision is logged without a result.
			res, err := opa.Decision(ctx, sdk.DecisionOptions{Path: "/authz/nothing_here", Input: map[string]any{"session_id": "sess-sdk"}})
			if !sdk.IsUndefinedErr(err) {
				t.Fatalf("undefined decision: %v, %v", res, err)
			}
			flushDecisionLogs(t, opa)

			is := f.Store.(ledger.IngestStore)
			for i, id := range ids {
				r, err := is.IngestedByKey(ctx, "opa", id)
				if err != nil {
					t.Fatalf("decision %d (%s) not ingested: %v", i, id, err)
				}
				want := "sess-sdk"
				if i%5 == 4 {
					want = "opa:opa-sdk-1"
				}
				if r.SessionID != want {
					t.Fatalf("decision %d in session %s, want %s", i, r.SessionID, want)
				}
			}
			sess, err := f.Store.Session(ctx, "sess-sdk")
			if err != nil || sess.Length != 21 {
				t.Fatalf("sess-sdk: %+v, %v", sess, err)
			}
			es, err := f.Store.Entries(ctx, "sess-sdk", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			bigInt := regexp.MustCompile(`"time\.now_ns":\{"\[\]":(\d{19})\}`)
			undefined := 0
			for _, e := range es {
				var c struct {
					Decision struct {
						Result         json.RawMessage `json:"result"`
						NDBuiltinCache string          `json:"nd_builtin_cache"`
						PolicyVersions []struct {
							PolicyID string `json:"policy_id"`
							Version  string `json:"version"`
						} `json:"policy_versions"`
					} `json:"decision"`
				}
				if err := json.Unmarshal(e.Content, &c); err != nil {
					t.Fatal(err)
				}
				d := c.Decision
				if len(d.PolicyVersions) != 1 || d.PolicyVersions[0].PolicyID != "authz" || d.PolicyVersions[0].Version != "rev-42" {
					t.Fatalf("policy versions %+v", d.PolicyVersions)
				}
				if d.Result == nil {
					undefined++
					continue
				}
				// The entry keeps time.now_ns exactly as OPA wrote it.
				src, _ := sourceRecord(t, f.Store, "sess-sdk", e.Position)
				m, ms := bigInt.FindStringSubmatch(d.NDBuiltinCache), bigInt.FindStringSubmatch(src)
				if string(d.Result) == "true" && (m == nil || ms == nil || m[1] != ms[1]) {
					t.Fatalf("nd_builtin_cache %q, source %q", d.NDBuiltinCache, src)
				}
			}
			if undefined != 1 {
				t.Fatalf("%d undefined decisions, want 1", undefined)
			}
			exportVerify(t, f, "sess-sdk", f.Options(), f.Trust(t))
			exportVerify(t, f, "opa:opa-sdk-1", f.Options(), f.Trust(t))

			// OPA retries after a failed upload; the retry finds the stored
			// decisions as duplicates, not second entries.
			flushDecisionLogs(t, opa)
			if again, _ := f.Store.Session(ctx, "sess-sdk"); again.Length != 21 {
				t.Fatalf("after a second upload: %d entries", again.Length)
			}
		})
	}
}
