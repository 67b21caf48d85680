// Package sqlq loads named queries from a .sql file. Each query starts with
// a line "-- name: QueryName" and runs to the next such line.
package sqlq

import (
	"fmt"
	"reflect"
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

// Load returns a T, a struct of string fields, with each field holding the
// query of src named like the field. It panics when a field has no query
// or a query has no field. Stores call it while their package initialises,
// so a misspelt name stops every test and binary at start rather than the
// first call of the query that needs it; call sites read fields, so a
// misspelt field does not compile.
func Load[T any](src string) T {
	qs := Parse(src)
	var t T
	v := reflect.ValueOf(&t).Elem()
	if v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("sqlq: Load needs a struct, not %T", t))
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String {
			panic(fmt.Sprintf("sqlq: field %s is not a string", f.Name))
		}
		q, ok := qs[f.Name]
		if !ok {
			panic(fmt.Sprintf("sqlq: no query %q", f.Name))
		}
		v.Field(i).SetString(q)
		delete(qs, f.Name)
	}
	for name := range qs {
		panic(fmt.Sprintf("sqlq: query %q has no field", name))
	}
	return t
}
