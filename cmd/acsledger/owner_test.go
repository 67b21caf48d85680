package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlainAppendIntoGuardianSession: over real HTTP, against both stores,
// an entry posted through the plain append API into a session the Guardian
// writes is refused with 409 naming the owner, and the session's chain is
// unchanged; the sessions the plain API creates stay its own. Before
// sessions had owners the entry was chained, and the Guardian's next
// signed response published a chain_hash over it.
func TestPlainAppendIntoGuardianSession(t *testing.T) { stores(t, testPlainAppendIntoGuardianSession) }

func testPlainAppendIntoGuardianSession(t *testing.T, db string) {
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys)
	s := startServer(t, "--db", db, "--keys", keys)
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"demo", "--url", s.url, "--keys", keys}, &out, &errs); code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	_, sessions := parseDemo(t, out.String())
	if len(sessions) == 0 {
		t.Fatalf("demo made no session:\n%s", out.String())
	}
	sid := sessions[0]
	before := session(t, s.url, sid)
	if before["writer"] != "guardian" {
		t.Fatalf("demo session %s: %v, want writer guardian", sid, before)
	}
	code, body := post(t, s.url+"/api/v1/sessions/"+sid+"/entries", entryJSON(99))
	if code != http.StatusConflict || body["owner"] != "guardian" || body["writer"] != "external" ||
		!strings.Contains(body["error"].(string), "accepts no entry from the external writer") {
		t.Fatalf("plain append into a Guardian session: %d %v", code, body)
	}
	if after := session(t, s.url, sid); after["length"] != before["length"] || after["chain_hash"] != before["chain_hash"] {
		t.Fatalf("session moved: %v -> %v", before, after)
	}
	if code, body := post(t, s.url+"/api/v1/sessions/plain-1/entries?agent_id=a", entryJSON(1)); code != http.StatusCreated {
		t.Fatalf("plain append into a new session: %d %v", code, body)
	}
	if got := session(t, s.url, "plain-1"); got["writer"] != "external" {
		t.Fatalf("plain session: %v", got)
	}
}

func session(t *testing.T, url, id string) map[string]any {
	t.Helper()
	code, b := get(t, url+"/api/v1/sessions/"+id)
	var m map[string]any
	if code != http.StatusOK || json.Unmarshal(b, &m) != nil {
		t.Fatalf("GET session %s: %d %s", id, code, b)
	}
	return m
}
