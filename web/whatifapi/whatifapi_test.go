package whatifapi_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/whatifapi"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// denyReadFile is added to the baseline by the uploaded candidate.
const denyReadFile = "package acs.tools\n\nimport data.acs.call\n\nfindings contains {\"disposition\": \"deny\", \"rule_id\": \"candidate.no_read_file\", \"reason_codes\": [\"x\"], \"reasoning\": \"no\"} if {\n\tcall.is_tool_call\n\tcall.name == \"read_file\"\n}\n"

// archive is the baseline plus extra modules as an OPA bundle archive.
func archive(t *testing.T, extra map[string]string) []byte {
	t.Helper()
	b := policy.Baseline()
	files := map[string][]byte{"data.json": b.Data}
	for p, src := range b.Modules {
		files[p] = []byte(src)
	}
	for p, src := range extra {
		files[p] = []byte(src)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for p, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// wait polls a run until it is no longer running.
func wait(t *testing.T, url string, header ...string) whatifapi.RunJSON {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, b := webtest.Do(t, "GET", url, nil, header...)
		var run whatifapi.RunJSON
		if code != 200 || json.Unmarshal(b, &run) != nil {
			t.Fatalf("GET %s: %d %s", url, code, b)
		}
		if run.State != "running" {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is still running: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWhatIfRoutes: an uploaded candidate that denies read_file reports
// exactly the read_file steps; a recorded version runs too; incident
// mode answers for the asked step; bad bundles and filters are refused
// before any run, naming what; a viewer may not start one; a second run
// waits for the first.
func TestWhatIfRoutes(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			webtest.RecordPermissive(t, f.Store)
			base := webtest.Serve(t, web.New(f.Store, web.Options{Auth: webtest.Auth(f.Store),
				WhatIf: whatifapi.Options{Store: f.Store, Share: 1}})) + "/api/v1"
			gz := []string{"Content-Type", "application/gzip"}
			js := []string{"Content-Type", "application/json"}

			code, h, b := webtest.Do(t, "POST", base+"/whatif?label=no-read-file", archive(t, map[string]string{"candidate.rego": denyReadFile}), gz...)
			if code != 202 || !strings.HasPrefix(h.Get("Location"), "/api/v1/whatif/") {
				t.Fatalf("start: %d %s", code, b)
			}
			run := wait(t, strings.TrimSuffix(base, "/api/v1")+h.Get("Location"))
			var want []string
			for _, s := range f.Steps {
				if strings.Contains(string(s.Params), `"read_file"`) {
					want = append(want, s.RequestID)
				}
			}
			var got []string
			for _, c := range run.Changes {
				got = append(got, c.StepID)
				if c.Kind != "allow->deny" || c.Candidate.Rules[0] != "candidate.no_read_file" {
					t.Errorf("change %+v", c)
				}
			}
			if run.State != "done" || run.Summary == nil || strings.Join(got, ",") != strings.Join(want, ",") || len(want) == 0 ||
				run.Summary.Changed != int64(len(want)) || run.Candidate != "candidate@no-read-file" {
				t.Fatalf("run %+v, changed %v, want %v", run, got, want)
			}

			// A recorded version: the permissive one allows what the
			// baseline denied.
			code, h, b = webtest.Do(t, "POST", base+"/whatif", []byte(`{"policy_id":"`+policy.BaselineID+`","policy_version":"`+webtest.PermissiveVersion+`"}`), js...)
			if code != 202 {
				t.Fatalf("recorded version: %d %s", code, b)
			}
			run = wait(t, strings.TrimSuffix(base, "/api/v1")+h.Get("Location"))
			if run.Summary == nil || run.Summary.ByKind["deny->allow"] == 0 {
				t.Fatalf("recorded version: %+v", run)
			}

			// Incident mode: the denied bash call, under the permissive
			// version.
			deny := f.Step(t, "steps/toolCallRequest", "deny")
			code, h, b = webtest.Do(t, "POST", base+"/whatif?request_id="+deny.RequestID+"&window=10m",
				[]byte(`{"policy_id":"`+policy.BaselineID+`","policy_version":"`+webtest.PermissiveVersion+`"}`), js...)
			if code != 202 {
				t.Fatalf("incident: %d %s", code, b)
			}
			run = wait(t, strings.TrimSuffix(base, "/api/v1")+h.Get("Location"))
			if run.Summary == nil || run.Summary.Focus == nil || run.Summary.Focus.StepID != deny.RequestID ||
				run.Summary.Focus.Kind != "deny->allow" || run.Filter.AgentID != "agent-7" || run.Filter.Since == nil {
				t.Fatalf("incident: %+v", run)
			}

			for name, c := range map[string]struct {
				query, ctype string
				body         []byte
				code         int
				msg          string
			}{
				"does not compile": {"", "application/gzip", archive(t, map[string]string{"bad.rego": "package acs.bad\n\nx := {\n"}), 400, "bad.rego:"},
				"not an archive":   {"", "application/gzip", []byte("plain text"), 400, "gzip"},
				"unknown decision": {"?decision=maybe", "application/gzip", archive(t, nil), 400, "decision \"maybe\""},
				"inverted range":   {"?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "application/gzip", archive(t, nil), 400, "until"},
				"over the cap":     {"?limit=99999999", "application/gzip", archive(t, nil), 400, "limit"},
				"unknown version":  {"", "application/json", []byte(`{"policy_id":"nope","policy_version":"1"}`), 404, "nope"},
				"no content type":  {"", "text/plain", []byte("x"), 400, "Content-Type"},
			} {
				code, _, b := webtest.Do(t, "POST", base+"/whatif"+c.query, c.body, "Content-Type", c.ctype)
				if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
					t.Errorf("%s: %d %s, want %d naming %q", name, code, b, c.code, c.msg)
				}
			}

			viewer := webtest.Token(t, f.Store, access.TokenRequest{Name: "v", Role: "viewer"})
			if code, _, b := webtest.Do(t, "POST", base+"/whatif", archive(t, nil), "Content-Type", "application/gzip", "Authorization", "Bearer "+viewer); code != 403 {
				t.Errorf("a viewer started a run: %d %s", code, b)
			}
			if code, _, _ := webtest.Do(t, "GET", base+"/whatif/nope", nil); code != 404 {
				t.Errorf("an unknown run: %d", code)
			}
		})
	}
}

// TestOneRunAtATime: while a run goes, another is answered 429; a
// cancelled run ends cancelled.
func TestOneRunAtATime(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	// The first run holds at its first page until it is cancelled, so it
	// is still running when the second request comes, however fast the
	// machine or few the fixture's steps.
	held := &heldSteps{Store: f.Store, hold: make(chan struct{})}
	base := webtest.Serve(t, web.New(f.Store, web.Options{Auth: webtest.Auth(f.Store),
		WhatIf: whatifapi.Options{Store: held}})) + "/api/v1"
	code, h, b := webtest.Do(t, "POST", base+"/whatif", archive(t, nil), "Content-Type", "application/gzip")
	if code != 202 {
		t.Fatalf("start: %d %s", code, b)
	}
	if code, h2, b := webtest.Do(t, "POST", base+"/whatif", archive(t, nil), "Content-Type", "application/gzip"); code != 429 || h2.Get("Retry-After") == "" {
		t.Fatalf("a second run: %d %s", code, b)
	}
	loc := strings.TrimSuffix(base, "/api/v1") + h.Get("Location")
	if code, _, b := webtest.Do(t, "POST", loc+"/cancel", nil); code != 202 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	if run := wait(t, loc); run.State != "cancelled" {
		t.Fatalf("after cancel: %+v", run)
	}
	close(held.hold)
	code, h, b = webtest.Do(t, "POST", base+"/whatif", archive(t, nil), "Content-Type", "application/gzip")
	if code != 202 {
		t.Fatalf("a run after the cancelled one: %d %s", code, b)
	}
	if run := wait(t, strings.TrimSuffix(base, "/api/v1")+h.Get("Location")); run.State != "done" {
		t.Fatalf("the run after the cancelled one: %+v", run)
	}
}

// heldSteps is a store whose step pages wait until hold is closed or the
// run is cancelled.
type heldSteps struct {
	whatifapi.Store
	hold chan struct{}
}

func (s *heldSteps) RecordedSteps(ctx context.Context, f ledger.StepFilter) ([]ledger.RecordedStep, error) {
	select {
	case <-s.hold:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.RecordedSteps(ctx, f)
}
