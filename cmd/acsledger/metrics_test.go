package main

import (
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMetricsShowReverification: the scheduled whole-ledger re-verification
// reports through /metrics, including how many sessions failed.
func TestMetricsShowReverification(t *testing.T) {
	s := startServer(t, "--db", t.TempDir(), "--reverify-every", "300ms")
	// One session from the plain append API: it has no signed responses, so
	// re-verification counts it as failed (entry_without_response).
	if code, out := post(t, s.url+"/api/v1/sessions/m1/entries", entryJSON(0)); code != 201 {
		t.Fatalf("append: %d %v", code, out)
	}
	runs := regexp.MustCompile(`(?m)^acsledger_reverify_runs_total\{[^}]*\} ([0-9]+)`)
	failed := regexp.MustCompile(`(?m)^acsledger_reverify_sessions_failed(\{[^}]*\})? 1$`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, s.url+"/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		text := string(body)
		if m := runs.FindStringSubmatch(text); m != nil && m[1] != "0" && failed.MatchString(text) {
			if !strings.Contains(text, "# TYPE acsledger_reverify_duration") {
				t.Fatalf("no re-verification duration histogram:\n%s", text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed re-verification in /metrics after 30s:\n%s", text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Refused credentials are counted by reason, and evidence reads by
	// whether the access log took them.
	req, _ := http.NewRequest("GET", s.url+"/api/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer acsl_"+strings.Repeat("Q", 43))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("unknown token: %v %v", resp, err)
	}
	if code, _ := get(t, s.url+"/api/v1/sessions/m1"); code != 200 {
		t.Fatalf("read m1: %d", code)
	}
	_, body := get(t, s.url+"/metrics")
	for _, want := range []string{`acsledger_auth_refusals_total{acsledger_reason="unknown"`, `acsledger_access_log_records_total{acsledger_outcome="recorded"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	s.stop(t, syscall.SIGTERM)
}
