package web

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestOpenAPICoversRoutes checks that docs/openapi.yaml documents every
// route under /api/v1, method by method, and nothing that is not served.
func TestOpenAPICoversRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	pathRe := regexp.MustCompile(`^  (/\S*):$`)
	methodRe := regexp.MustCompile(`^    (get|post|put|delete|patch):`)
	var path string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		if m := pathRe.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if !strings.HasPrefix(line, "  ") {
			path = ""
		} else if m := methodRe.FindStringSubmatch(line); m != nil && path != "" {
			documented[strings.ToUpper(m[1])+" "+path] = true
		}
	}
	served := map[string]bool{}
	err = chi.Walk(New(nil, Options{}).Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if p, ok := strings.CutPrefix(route, "/api/v1"); ok {
			served[method+" "+strings.TrimSuffix(p, "/")] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(served) < 9 {
		t.Fatalf("only %d routes found under /api/v1: %v", len(served), served)
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("%s is served but not in docs/openapi.yaml", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("%s is in docs/openapi.yaml but not served", r)
		}
	}
}
