package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/web/internal/webtest"
)

// TestReadyz: /readyz follows the Ready check, names the component that
// cannot be written and never shows the cause (the route needs no
// credential); /healthz stays 200 either way.
func TestReadyz(t *testing.T) {
	var fail error
	srv := httptest.NewServer(New(nil, Options{Ready: func(context.Context) error { return fail }}))
	t.Cleanup(srv.Close)
	check := func(path string, wantCode int, wantBody string) {
		t.Helper()
		code, _, body := webtest.Do(t, http.MethodGet, srv.URL+path, nil)
		if code != wantCode || strings.TrimSpace(string(body)) != wantBody {
			t.Fatalf("GET %s: %d %s, want %d %s", path, code, body, wantCode, wantBody)
		}
	}
	check("/readyz", 200, `{"status":"ready"}`)
	fail = &NotReadyError{Component: "store", Err: errors.New("dial tcp 10.0.0.7:5432: connection refused")}
	check("/readyz", 503, `{"component":"store","status":"unavailable"}`)
	check("/healthz", 200, `{"status":"ok"}`)
	fail = &NotReadyError{Component: "log", Err: errors.New("integration failed")}
	check("/readyz", 503, `{"component":"log","status":"unavailable"}`)
	fail = nil
	check("/readyz", 200, `{"status":"ready"}`)
}
