package webtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/web/access"
)

// Serve serves h on a loopback port until the test ends and returns its
// URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Auth accepts AdminToken as an admin and the tokens of ts, and records
// no access: the tests count the sessions of a ledger, which the access
// log's own sessions would change.
func Auth(ts access.Tokens) access.Options {
	return access.Options{Bootstrap: AdminToken, NoAccessLog: true, Tokens: ts}
}

// Token creates a token in ts as req says and returns it.
func Token(t testing.TB, ts access.Tokens, req access.TokenRequest) string {
	t.Helper()
	tok, _, err := access.CreateToken(context.Background(), ts, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// PermissiveVersion is a second recorded version of the baseline's policy
// id (RecordPermissive); it allows everything.
const PermissiveVersion = "0.0.0-permissive"

// RecordPermissive records PermissiveVersion in st.
func RecordPermissive(t testing.TB, st policy.Recorder) {
	t.Helper()
	b := &policy.Bundle{ID: policy.BaselineID, Version: PermissiveVersion, Modules: map[string]string{
		"permit.rego": "package acs\n\ndecision := {\"decision\": \"allow\", \"rule_ids\": [\"permit.all\"]}\n",
	}}
	if _, err := policy.New(context.Background(), b, st, nil); err != nil {
		t.Fatalf("record the permissive bundle: %v", err)
	}
}
