package ui_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/web/ui"
)

// TestPagesByteIdentical pins every page to the SHA-256 of the static file
// it was served from before the pages shared one head template: the browser
// gets the same bytes, byte for byte.
func TestPagesByteIdentical(t *testing.T) {
	r := chi.NewRouter()
	ui.Mount(r)
	for path, want := range map[string]string{
		"/ui/":                "42c5872b96a8794cf2e4b88f62a448ce405d7965e088128b5263005c496f9a40", // index.html
		"/ui/sessions/s-1":    "8e8d125cb2c6ac1c5874f0779df6e3870af2947632aba985cfdc6f0a10491448", // session.html
		"/ui/dashboard":       "6788328edc763f451f26102beda10c03b149b1bf945c14a546ed1297ddbfd458", // dashboard.html
		"/ui/decisions/req-1": "b957dcfa2aaf0ece9e67ee762786b065e08c08f150296faa064a51af417b1adf", // decision.html
		"/ui/search":          "ecefbe13e72aa38d62667bcb4fa2a9129cc7d6963bffb5d1b9f7a0a74a4b4aee", // search.html
		"/ui/log":             "7ec270086215d5b8f0e6c9575e28da4ea059bc38050739a2ec79d769037e1198", // log.html
		"/ui/login":           "bfcbb005c20a191a044649f13ffca7ce5e411a700c02ee43b67f4f64d17417de", // login.html
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", path, rec.Code)
			continue
		}
		sum := sha256.Sum256(rec.Body.Bytes())
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("GET %s: sha256 %s, want %s; body:\n%s", path, got, want, rec.Body.Bytes())
		}
	}
}
