package ingestapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
)

// TestIngestOPASubject: the upload route maps the subject as configured
// (OPASubjectPath, serve's --opa-subject-path): the session of alice's
// decision belongs to agent "alice", which `erase --agent` matches, and
// its stored entry holds neither her input nor the client's address.
func TestIngestOPASubject(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth,
		Ingest: web.IngestOptions{Store: f.Store, OPASubjectPath: "input.user"}}))
	defer srv.Close()
	body := `[{"decision_id":"h-1","path":"authz/allow","input":{"session_id":"http-a","user":"alice"},"result":true,` +
		`"labels":{"id":"o"},"requested_by":"198.51.100.4:40022","timestamp":"2026-12-01T10:00:00Z"},` +
		`{"decision_id":"h-2","path":"authz/allow","input":{"session_id":"http-b","user":7},"labels":{"id":"o"},"timestamp":"2026-12-01T10:00:01Z"}]`
	resp, out := post(t, srv.URL+"/api/v1/ingest/opa/logs", strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK || out["accepted"] != 1.0 || out["quarantined"] != 1.0 {
		t.Fatalf("upload: %d %v", resp.StatusCode, out)
	}
	q := out["quarantined_records"].([]any)[0].(map[string]any)
	if q["reason"] != "schema_invalid" || !strings.Contains(q["detail"].(string), "the subject at input.user is not a string") {
		t.Fatalf("quarantined %v", q)
	}
	ctx := context.Background()
	s, err := f.Store.Session(ctx, "http-a")
	if err != nil || s.AgentID != "alice" {
		t.Fatalf("session http-a: agent %q, %v", s.AgentID, err)
	}
	es, err := f.Store.Entries(ctx, "http-a", 0, 1)
	if err != nil || len(es) != 1 {
		t.Fatalf("entries: %v", err)
	}
	for _, banned := range []string{"198.51.100.4", "requested_by", "alice"} {
		if bytes.Contains(es[0].Content, []byte(banned)) {
			t.Fatalf("the stored entry holds %s: %s", banned, es[0].Content)
		}
	}
}
