// Package sqlq loads named queries from a .sql file. Each query starts with
// a line "-- name: QueryName" and runs to the next such line.
package sqlq

import (
	"fmt"
	"strings"
)

// Parse splits src into named queries. It panics on a malformed file: the
// files are embedded, so a mistake is a programming error found by any test.
func Parse(src string) map[string]string {
	qs := make(map[string]string)
	var name string
	var body strings.Builder
	flush := func() {
		if name == "" {
			return
		}
		q := strings.TrimSpace(body.String())
		if q == "" {
			panic(fmt.Sprintf("sqlq: query %q is empty", name))
		}
		if _, dup := qs[name]; dup {
			panic(fmt.Sprintf("sqlq: query %q defined twice", name))
		}
		qs[name] = q
	}
	for line := range strings.Lines(src) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			flush()
			name = strings.TrimSpace(n)
			body.Reset()
			continue
		}
		if name != "" {
			body.WriteString(line)
		}
	}
	flush()
	return qs
}

// Must returns the query called name, panicking when it is missing.
func Must(qs map[string]string, name string) string {
	q, ok := qs[name]
	if !ok {
		panic(fmt.Sprintf("sqlq: no query %q", name))
	}
	return q
}
