// Package ui is acsledger's web UI: a login page, a sessions list, a
// session's timeline with its verification verdict and export links, a
// dashboard running the whole-ledger re-verification, and a decision view
// that replays a recorded decision. Who may see which page, and the login
// itself, are access control's (web/access, web.AccessTable,
// docs/security.md); the pages hide what the role may not use. It is a few
// embedded static files; the pages fetch the /api/v1 JSON API
// (docs/api.md) from the same origin and render it with DOM text nodes
// only, because entries carry attacker-influenced strings (tool arguments,
// session ids). There is no build step and nothing is loaded from
// elsewhere.
package ui

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"
)

//go:embed static
var static embed.FS

// csp keeps the pages to their own scripts and styles: even a string that
// slipped into markup could not run.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Mount serves the UI under /ui/ on r, beside the API it reads.
func Mount(r chi.Router) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	r.Get("/ui", func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/ui/", http.StatusMovedPermanently)
	})
	r.Get("/ui/", page(files, "index.html"))
	r.Get("/ui/sessions/{session_id}", page(files, "session.html"))
	r.Get("/ui/dashboard", page(files, "dashboard.html"))
	r.Get("/ui/decisions/{request_id}", page(files, "decision.html"))
	r.Get("/ui/search", page(files, "search.html"))
	r.Get("/ui/log", page(files, "log.html"))
	r.Get("/ui/login", page(files, "login.html"))
	r.Method(http.MethodGet, "/ui/static/*", secured(http.StripPrefix("/ui/static/", http.FileServerFS(files))))
}

// page serves one HTML shell; the script reads what it shows from the
// location, never from markup the server fills in.
func page(files fs.FS, name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		setHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	}
}

func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		h.ServeHTTP(w, r)
	})
}

func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
