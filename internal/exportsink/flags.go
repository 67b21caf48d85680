package exportsink

import (
	"fmt"
	"strings"
)

// Configure checks serve's --export NAME=URL values and --export-format
// NAME=FORMAT values together: every name once, every format naming a
// configured sink. The error names the flag and never holds a password.
func Configure(exports, formats []string) ([]Config, error) {
	fmts := map[string]string{}
	for _, v := range formats {
		name, f, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--export-format %q: want NAME=FORMAT (ocsf, cloudevents or acs)", v)
		}
		if _, dup := fmts[name]; dup {
			return nil, fmt.Errorf("--export-format %s: given twice", name)
		}
		fmts[name] = f
	}
	var out []Config
	seen := map[string]bool{}
	for _, v := range exports {
		name, raw, err := ParseFlag(v)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("--export %s: the name is given twice", name)
		}
		seen[name] = true
		c, err := Parse(name, raw, fmts[name])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for name := range fmts {
		if !seen[name] {
			return nil, fmt.Errorf("--export-format %s: no --export %s=URL", name, name)
		}
	}
	return out, nil
}
