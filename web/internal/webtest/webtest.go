// Package webtest holds what the tests of the web packages share: a
// client that speaks to a test server with the bootstrap admin token,
// error bodies read back, and uploads whose body the test writes as it
// goes.
package webtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/acsledger/acsledger/web/httpapi"
)

// AdminToken is the bootstrap admin token of the test servers; Do sends
// it unless told otherwise.
const AdminToken = "s3cret-admin-token"

// Do sends a request with the given header pairs; without an
// Authorization pair it sends AdminToken ("" sends none).
func Do(t testing.TB, method, url string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, b := send(t, req)
	return resp.StatusCode, resp.Header, b
}

// Get gets url with no credential.
func Get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, req)
}

// send sends req and reads the whole answer.
func send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// ErrorText is the message of an error answer; it fails t for any other
// body.
func ErrorText(t testing.TB, b []byte) string {
	t.Helper()
	var e httpapi.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("not an error body: %s", b)
	}
	return e.Error
}

// UploadAnswer is what an upload was answered.
type UploadAnswer struct {
	Code   int
	Header http.Header
	Body   string
}

// SlowUpload starts an upload, sent by send, whose body the test writes
// as it goes through the returned writer; the channel gets the answer.
// t's end closes the body, so that no handler is left waiting for it (an
// httptest server's Close waits for its handlers: register it first).
func SlowUpload(t *testing.T, send func(body io.Reader) (*http.Response, error)) (*io.PipeWriter, <-chan UploadAnswer) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
	done := make(chan UploadAnswer, 1)
	go func() {
		resp, err := send(pr)
		if err != nil {
			done <- UploadAnswer{Body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- UploadAnswer{resp.StatusCode, resp.Header, string(b)}
	}()
	return pw, done
}

// Answer waits for an upload's answer, a minute at most.
func Answer(t *testing.T, ch <-chan UploadAnswer, what string) UploadAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer within a minute", what)
		return UploadAnswer{}
	}
}
