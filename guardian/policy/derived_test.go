package policy

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

// TestBaselineDerivedConstants checks the regular expressions the baseline
// writes out in full, so that no decision pays for building them, against
// the lists they are built from.
func TestBaselineDerivedConstants(t *testing.T) {
	opts := []func(*rego.Rego){rego.Query(`
		all := concat("|", [sprintf("(?:%s)", [p.re]) | some p in data.acs.secrets.patterns])
		n := count(data.acs.secrets.patterns)
		repl := concat("", [
			concat("", [sprintf("${%d}", [(2 * i) + 1]) | some i in numbers.range(0, n - 1)]),
			"[REDACTED]",
			concat("", [sprintf("${%d}", [(2 * i) + 2]) | some i in numbers.range(0, n - 1)]),
		])
		remote := concat("|", [sprintf("(?:%s)", [p]) | some p in data.acs.shell.remote_patterns])
		got_all := data.acs.secrets.all_patterns
		got_repl := data.acs.secrets.replacement
		got_remote := data.acs.shell.remote_execution
	`)}
	b := Baseline()
	for p, m := range b.Modules {
		opts = append(opts, rego.Module(p, m))
	}
	rs, err := rego.New(opts...).Eval(context.Background())
	must(t, err)
	if len(rs) != 1 {
		t.Fatalf("query undefined: %v", rs)
	}
	bind := rs[0].Bindings
	for _, k := range []string{"all", "repl", "remote"} {
		if bind[k] != bind["got_"+k] {
			t.Errorf("the baseline's written-out %s is\n%v\nbut its list makes\n%v", k, bind["got_"+k], bind[k])
		}
	}
	if n := bind["n"]; n == nil {
		t.Fatal("no secret patterns")
	}
}
