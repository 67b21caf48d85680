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
