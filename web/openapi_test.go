package web

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"go.yaml.in/yaml/v3"
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
	// Routes mounted only with a Merkle log (web/tlogserve) are not in
	// this router; the access table lists them.
	for _, rt := range AccessTable {
		if p, ok := strings.CutPrefix(rt.Pattern, "/api/v1"); ok {
			served[rt.Method+" "+p] = true
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("%s is in docs/openapi.yaml but not served", r)
		}
	}
}

// TestOpenAPIValid loads docs/openapi.yaml with kin-openapi, a maintained
// OpenAPI 3 library, validates it, and finds in it every route of the
// access table under /api/v1 with its method (the routes outside it speak
// other protocols, documented elsewhere: the Guardian's JSON-RPC, the
// log's C2SP endpoints, /metrics, the UI). A YAML flow mapping with an
// unquoted comma in a description ends the description early and leaves a
// stray member with a null value; validation does not catch every such
// member, so the test also refuses any null value in the document.
func TestOpenAPIValid(t *testing.T) {
	loader := openapi3.NewLoader()
	// The one external reference is docs/evidence-bundle.schema.json,
	// beside the document.
	loader.IsExternalRefsAllowed = true
	doc, err := loader.LoadFromFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml does not validate: %v", err)
	}

	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
					t.Errorf("docs/openapi.yaml line %d: member %q has no value (a comma in an unquoted flow-mapping value?)", n.Content[i].Line, n.Content[i].Value)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&node)

	n := 0
	for _, rt := range AccessTable {
		p, ok := strings.CutPrefix(rt.Pattern, "/api/v1")
		if !ok {
			continue
		}
		n++
		item := doc.Paths.Find(p)
		if item == nil {
			t.Errorf("access table route %s %s is not in docs/openapi.yaml", rt.Method, rt.Pattern)
			continue
		}
		if item.GetOperation(rt.Method) == nil {
			t.Errorf("access table route %s %s: docs/openapi.yaml has the path but not the method", rt.Method, rt.Pattern)
		}
	}
	if n < 20 {
		t.Fatalf("only %d access table routes under /api/v1", n)
	}
}
