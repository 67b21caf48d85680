package sqlq

import "testing"

func TestParse(t *testing.T) {
	qs := Parse(`-- file comment, before any name

-- name: First
SELECT 1;

-- name: Second
-- a comment inside the query stays
SELECT 2
FROM t;
`)
	if len(qs) != 2 || qs["First"] != "SELECT 1;" || qs["Second"] != "-- a comment inside the query stays\nSELECT 2\nFROM t;" {
		t.Fatalf("got %q", qs)
	}
	for _, bad := range []string{"-- name: A\n-- name: B\nSELECT 1;", "-- name: A\nSELECT 1;\n-- name: A\nSELECT 2;"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Parse(%q) did not panic", bad)
				}
			}()
			Parse(bad)
		}()
	}
}

func TestLoad(t *testing.T) {
	const src = "-- name: First\nSELECT 1;\n-- name: Second\nSELECT 2;\n"
	q := Load[struct{ First, Second string }](src)
	if q.First != "SELECT 1;" || q.Second != "SELECT 2;" {
		t.Fatalf("got %+v", q)
	}
	for name, load := range map[string]func(){
		"field without query": func() { Load[struct{ First, Second, Third string }](src) },
		"query without field": func() { Load[struct{ First string }](src) },
		"misspelt field":      func() { Load[struct{ First, Secnod string }](src) },
		"not a struct":        func() { Load[string](src) },
		"not a string field":  func() { Load[struct{ First, Second int }](src) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Load did not panic")
				}
			}()
			load()
		})
	}
}
