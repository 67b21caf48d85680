package ingestapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// The ingest routes need a writer's credential (docs/security.md); these
// tests send the server's bootstrap token on every request.
const ingestToken = "acsl_ingest-test-bootstrap-token-0123456789"

var (
	ingestAuth = web.AuthOptions{Bootstrap: ingestToken, NoAccessLog: true}
	authed     = &http.Client{Transport: bearer{ingestToken}}
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func post(t *testing.T, url string, body io.Reader, header map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := authed.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

// TestIngestBackpressure: while MaxInFlight uploads are being handled, one
// more is refused with 429 and Retry-After at once, while it is still
// being sent: the server does not wait to read it. Once the slot is free
// again, a retry goes through.
func TestIngestBackpressure(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store, MaxInFlight: 1}}))
	t.Cleanup(srv.Close) // after the uploads' bodies are closed: it waits for their handlers
	url := srv.URL + "/api/v1/ingest/opa/logs"

	send := func(body io.Reader) (*http.Response, error) { return authed.Post(url, "application/json", body) }
	body, first := webtest.SlowUpload(t, send)
	// The handler reads the upload only once it holds the slot. This write
	// returns once the server has read most of it, as it is larger than
	// loopback socket buffers hold (a few MB), so the slot is taken then:
	// 256 decisions of 64 KiB.
	var head bytes.Buffer
	head.WriteString(`[`)
	for i := range padding {
		fmt.Fprintf(&head, `{"decision_id":"pad-%d","labels":{"id":"o"},"timestamp":"2026-12-01T09:00:00Z","input":{"pad":"%s"}},`, i, strings.Repeat("x", 64<<10))
	}
	if _, err := body.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	// An upload that has sent its headers and never sends its body.
	_, refused := webtest.SlowUpload(t, send)
	got := webtest.Answer(t, refused, "the upload refused while its body was still open (the server waited to read it)")
	if got.Code != http.StatusTooManyRequests || got.Header.Get("Retry-After") != "1" || !strings.Contains(got.Body, "busy") {
		t.Fatalf("while the slot is taken: %d %v %s, want 429 with Retry-After 1", got.Code, got.Header, got.Body)
	}
	io.WriteString(body, `{"decision_id":"d-1","labels":{"id":"o"},"timestamp":"2026-12-01T10:00:01Z"}]`)
	body.Close()
	if got := webtest.Answer(t, first, "the first upload"); got.Code != http.StatusOK || !strings.Contains(got.Body, fmt.Sprintf(`"accepted":%d,`, padding+1)) {
		t.Fatalf("the first upload: %d %s", got.Code, got.Body)
	}
	// The slot is free again: the refused upload's retry goes through.
	resp, out := post(t, url, strings.NewReader(`[{"decision_id":"d-3","labels":{"id":"o"},"timestamp":"2026-12-01T10:00:02Z"}]`), nil)
	if resp.StatusCode != http.StatusOK || out["accepted"] != 1.0 {
		t.Fatalf("retry: %d %v", resp.StatusCode, out)
	}
	if s, err := f.Store.Session(context.Background(), "opa:o"); err != nil || s.Length != padding+2 {
		t.Fatalf("session opa:o: %+v, %v; want %d entries", s, err, padding+2)
	}
}

// padding is the number of 64 KiB decisions TestIngestBackpressure's
// first upload sends before the server is known to be reading it.
const padding = 256

// TestIngestOPAUpload checks the upload route's encodings and answers.
func TestIngestOPAUpload(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store}}))
	defer srv.Close()
	url := srv.URL + "/api/v1/ingest/opa/logs"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`[{"decision_id":"g-1","labels":{"id":"o"},"timestamp":"2026-12-01T10:00:00Z"},{"labels":{"id":"o"},"timestamp":"x"}]`))
	zw.Close()
	resp, out := post(t, url, &gz, map[string]string{"Content-Encoding": "gzip", "Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK || out["accepted"] != 1.0 || out["quarantined"] != 1.0 {
		t.Fatalf("gzip upload: %d %v", resp.StatusCode, out)
	}
	qs := out["quarantined_records"].([]any)
	if q := qs[0].(map[string]any); q["reason"] != "schema_invalid" || q["record"] != 2.0 || !strings.Contains(q["raw"].(string), `"timestamp":"x"`) {
		t.Fatalf("quarantined record %v", q)
	}
	for _, tc := range []struct {
		body, enc string
		code      int
	}{
		{`[]`, "br", http.StatusBadRequest},
		{`not gzip`, "gzip", http.StatusBadRequest},
		{`{"decision_id":"x"}`, "", http.StatusBadRequest},
	} {
		h := map[string]string{}
		if tc.enc != "" {
			h["Content-Encoding"] = tc.enc
		}
		if resp, out := post(t, url, strings.NewReader(tc.body), h); resp.StatusCode != tc.code {
			t.Errorf("%q (%s): %d %v, want %d", tc.body, tc.enc, resp.StatusCode, out, tc.code)
		}
	}
	// The quarantine is listed with the record's bytes.
	var list struct {
		Records []struct {
			Reason    string `json:"reason"`
			RawBase64 string `json:"raw_base64"`
			Record    int64  `json:"record"`
		}
	}
	getJSON(t, authed, srv.URL+"/api/v1/ingest/quarantine?source=opa", &list)
	if len(list.Records) != 1 || list.Records[0].Record != 2 || list.Records[0].Reason != "schema_invalid" ||
		!strings.Contains(mustBase64(t, list.Records[0].RawBase64), `"timestamp":"x"`) {
		t.Fatalf("quarantine listing %+v", list)
	}
	if r, _ := authed.Get(srv.URL + "/api/v1/ingest/flagged"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("flagged without flag: %d", r.StatusCode)
	}
}

// signA2H returns the A2H-Signature of body pushed to callback (spec §9.2).
func signA2H(t *testing.T, secret, body []byte, callback string, at time.Time, jti string) string {
	t.Helper()
	var resp struct {
		Version      string          `json:"a2h_version"`
		InReplyTo    string          `json:"in_reply_to"`
		ResolutionID string          `json:"resolution_id"`
		Resolution   string          `json:"resolution"`
		Response     json.RawMessage `json:"response"`
		State        json.RawMessage `json:"state"`
	}
	json.Unmarshal(body, &resp)
	var detail struct {
		ResolvedAt string `json:"resolved_at"`
	}
	json.Unmarshal(resp.Response, &detail)
	digest, err := ingest.PayloadSHA256(resp.Response, resp.State)
	if err != nil {
		t.Fatal(err)
	}
	ts := fmt.Sprint(at.Unix())
	sc, _ := json.Marshal(map[string]string{"a2h_version": resp.Version, "callback_url": callback, "id": resp.InReplyTo,
		"in_reply_to": resp.InReplyTo, "jti": jti, "payload_sha256": digest, "resolution": resp.Resolution,
		"resolution_id": resp.ResolutionID, "resolved_at": detail.ResolvedAt, "t": ts})
	canon, err := acs.Canonicalize(sc)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(canon)
	return fmt.Sprintf("t=%s,jti=%s,v1=%s", ts, jti, base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
}

// TestA2HPush: the live receiver verifies a Hub's push as of now against
// its own URL; a redelivery is a duplicate, a replayed jti is refused and
// quarantined.
func TestA2HPush(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	secret := []byte("hub secret")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(web.New(f.Store, web.Options{Auth: ingestAuth, Ingest: web.IngestOptions{Store: f.Store,
		A2HKeys: []ingest.A2HKey{{ID: "hub", HMAC: secret}}, Now: func() time.Time { return now },
	}}))
	defer srv.Close()
	url := srv.URL + "/api/v1/ingest/a2h"
	body := func(res string) []byte {
		return fmt.Appendf(nil, `{"a2h_version":"0.3","in_reply_to":"msg-1","resolution_id":%q,"agent":{"id":"bot","run_id":"r"},"resolution":"answered","response":{"value":"ok","actor":"human:alice","resolved_at":"2026-12-01T09:59:00Z"}}`, res)
	}
	push := func(b []byte, header string) (int, map[string]any) {
		resp, out := post(t, url, bytes.NewReader(b), map[string]string{"A2H-Signature": header, "Content-Type": "application/json"})
		return resp.StatusCode, out
	}
	if code, out := push(body("res-1"), signA2H(t, secret, body("res-1"), url, now.Add(-time.Second), "j-1")); code != 200 || out["status"] != "accepted" || out["session_id"] != "a2h:msg-1" {
		t.Fatalf("push: %d %v", code, out)
	}
	if code, out := push(body("res-1"), signA2H(t, secret, body("res-1"), url, now, "j-2")); code != 200 || out["status"] != "duplicate" {
		t.Fatalf("redelivery: %d %v", code, out)
	}
	if code, out := push(body("res-2"), signA2H(t, secret, body("res-2"), url, now, "j-1")); code != 401 || out["reason"] != "replayed_jti" {
		t.Fatalf("replayed jti: %d %v", code, out)
	}
	if code, out := push(body("res-3"), signA2H(t, secret, body("res-3"), "https://elsewhere/cb", now, "j-3")); code != 401 || out["reason"] != "signature_mismatch" {
		t.Fatalf("other callback: %d %v", code, out)
	}
	if code, out := push(body("res-4"), signA2H(t, secret, body("res-4"), url, now.Add(-time.Hour), "j-4")); code != 401 || out["reason"] != "stale_timestamp" {
		t.Fatalf("stale: %d %v", code, out)
	}
	if code, out := push([]byte(`{`), "t=1,jti=x,v1=AAAA"); code != 400 || out["reason"] != "malformed_json" {
		t.Fatalf("malformed: %d %v", code, out)
	}
	var list struct {
		Records []struct {
			Reason string  `json:"reason"`
			Raw    *string `json:"raw"`
		} `json:"records"`
		Next *string `json:"next"`
	}
	getJSON(t, authed, srv.URL+"/api/v1/ingest/quarantine?source=a2h&limit=2", &list)
	if len(list.Records) != 2 || list.Records[0].Reason != "replayed_jti" || list.Next == nil || !strings.Contains(*list.Records[0].Raw, `res-2`) {
		t.Fatalf("quarantine page %+v", list)
	}
}

// getJSON decodes the JSON answer of a GET of u through c into v.
func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	r, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	json.NewDecoder(r.Body).Decode(v)
}

func mustBase64(t *testing.T, s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
