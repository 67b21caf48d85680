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
// gets the same bytes, byte for byte. (Re-pinned when the header gained
// the What-if link and the decision view its What-if section, issue 23.)
func TestPagesByteIdentical(t *testing.T) {
	r := chi.NewRouter()
	ui.Mount(r)
	for path, want := range map[string]string{
		"/ui/":                "f14b4b9588f69e3e5b0f769d7be27d9812b2ea5726383ac994fcfd8476309eed", // index.html
		"/ui/sessions/s-1":    "cede8b1463b232448734f6d80bdc67b913baa6de4aafd66aad48ace18455b5ed", // session.html
		"/ui/dashboard":       "23a90def4ae37c58d2c6a946332d1d2ee992ce83fde3773b44868d52ead5398f", // dashboard.html
		"/ui/decisions/req-1": "1122a8d00015ccde45ef4ca4d88a624547a61b42d5e76ec6567d953f06b564df", // decision.html
		"/ui/search":          "89885f136df5ee1b50d05944a18387af6d1320a23a9fbfc0dfb202d6e7d1741c", // search.html
		"/ui/log":             "26f1e205a09970497f01b03bb5b1b76a2ebf5e9c8723a49f1b2228bbf3c4eaff", // log.html, since it takes receipts (issue 24)
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
