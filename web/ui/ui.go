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
// elsewhere. The pages share one <head> and header, pages/head.tmpl.
package ui

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/go-chi/chi/v5"
)

//go:embed static
var static embed.FS

// pageFiles holds each page's <main> onwards and head.tmpl, the <head> and
// header every page shares; a page is served as the two joined.
//
//go:embed pages
var pageFiles embed.FS

// A shell is one page: its route, its file under pages/, and what its head
// carries. Nav is false only on the login page, which has no menu to offer.
type shell struct {
	Route, File, Title, Page string
	Scripts                  []string // beyond app.js, in load order
	Nav                      bool
}

var shells = []shell{
	{"/ui/", "index.html", "Sessions", "sessions", []string{"search.js"}, true},
	{"/ui/sessions/{session_id}", "session.html", "Session", "session", []string{"search.js"}, true},
	{"/ui/dashboard", "dashboard.html", "Dashboard", "dashboard", []string{"search.js", "charts.js", "dashboard.js"}, true},
	{"/ui/decisions/{request_id}", "decision.html", "Decision", "decision", []string{"search.js"}, true},
	{"/ui/search", "search.html", "Search", "search", []string{"search.js"}, true},
	{"/ui/whatif", "whatif.html", "What-if", "whatif", []string{"charts.js", "whatif.js"}, true},
	{"/ui/log", "log.html", "Log", "log", []string{"search.js", "charts.js", "verify.js", "log.js"}, true},
	{"/ui/holds", "holds.html", "Legal holds", "holds", []string{"search.js", "holds.js"}, true},
	{"/ui/login", "login.html", "Log in", "login", nil, false},
}

// render joins a shell's head and body; the result is fixed at build time.
func render(head *template.Template, s shell) []byte {
	var b bytes.Buffer
	if err := head.Execute(&b, s); err != nil {
		panic(err)
	}
	body, err := fs.ReadFile(pageFiles, "pages/"+s.File)
	if err != nil {
		panic(err)
	}
	return append(b.Bytes(), body...)
}

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
	head := template.Must(template.ParseFS(pageFiles, "pages/head.tmpl"))
	for _, s := range shells {
		r.Get(s.Route, page(render(head, s)))
	}
	r.Method(http.MethodGet, "/ui/static/*", secured(http.StripPrefix("/ui/static/", http.FileServerFS(files))))
}

// page serves one HTML shell; the script reads what it shows from the
// location, never from markup the server fills in.
func page(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
