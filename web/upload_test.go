package web

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// This file's helpers are exported for the web_test package too.

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
