package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeIngestSubject: serve's --opa-subject-path reaches the OPA
// upload route: the session of alice's decision lists under agent
// "alice", which `erase --agent` and retention rules match.
func TestServeIngestSubject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServer(t, "--db", dir, "--opa-subject-path", "input.user")
	body := `[{"decision_id":"u-1","path":"authz/allow","input":{"session_id":"served-a","user":"alice"},"result":true,"labels":{"id":"o"},` +
		`"requested_by":"203.0.113.5:4000","timestamp":"2026-12-01T10:00:00Z"}]`
	req, _ := http.NewRequest(http.MethodPost, s.url+"/api/v1/ingest/opa/logs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sum["accepted"] != 1.0 {
		t.Fatalf("upload: %d %v", resp.StatusCode, sum)
	}
	req, _ = http.NewRequest(http.MethodGet, s.url+"/api/v1/sessions?agent_id=alice", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
			AgentID   string `json:"agent_id"`
		} `json:"sessions"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(list.Sessions) != 1 || list.Sessions[0].SessionID != "served-a" || list.Sessions[0].AgentID != "alice" {
		t.Fatalf("sessions of agent alice: %d %+v", resp.StatusCode, list)
	}
	s.stop(t, syscall.SIGTERM)
}
