package policy

import (
	"context"
	"encoding/json"
	"os"
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

// TestBaselineNormalizeShortcut checks that the baseline's shortcut for
// command lines that are already normal gives what the full normalization
// gives, on lines at the edge of the shortcut.
func TestBaselineNormalizeShortcut(t *testing.T) {
	lines := []string{
		"ls -la", "go test ./...", " ls", "ls ", "ls\u00a0", "\u3000ls", "ls\u0085", "ls\v", "\fls",
		"ls\u2003-la", "a  b", "a\tb", "a\rb", "a\nb", "echo 'x'", `echo "x"`, "a\\\nb", "a\\b",
		"rm${IFS}-rf${IFS}/", "rm$IFS-rf /", "cat $HOME/x", "ls\u2028", "ls \u00a0",
	}
	opts := []func(*rego.Rego){rego.Query(`
		line := input.line
		fast := data.acs.shell.normalize(line)
		a := regex.replace(line, ` + "`\\\\\\r?\\n`" + `, " ")
		b := regex.replace(a, ` + "`\\$\\{IFS\\}|\\$IFS\\b`" + `, " ")
		d := regex.replace(b, ` + "`[\"'\\\\]`" + `, "")
		full := trim_space(regex.replace(d, ` + "`[ \\t\\r\\n]+`" + `, " "))
	`)}
	for p, m := range Baseline().Modules {
		opts = append(opts, rego.Module(p, m))
	}
	pq, err := rego.New(opts...).PrepareForEval(context.Background())
	must(t, err)
	for _, line := range lines {
		rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"line": line}))
		must(t, err)
		if len(rs) != 1 {
			t.Fatalf("%q: query undefined", line)
		}
		if fast, full := rs[0].Bindings["fast"], rs[0].Bindings["full"]; fast != full {
			t.Errorf("normalize(%q) = %q, the full normalization gives %q", line, fast, full)
		}
	}
}

// baseline100Digest is the digest recorded for acsledger-baseline 1.0.0,
// kept in testdata/baseline-1.0.0 for comparison.
const baseline100Digest = "3091b1f894e75846868aca903a869dbb52c92ba8ff6cf2d5f83e98926d590ec4"

// TestBaselineDecidesAsPrevious holds the shipped baseline to deciding
// every baseline case and every step of the benchmark mix exactly as 1.0.0
// did: the whole decision (reasoning, policy data, redactions, details),
// not only what the cases pin, with only the cited version differing. 1.1.0
// changed only speed; a later version that changes decisions on purpose
// must say so here.
func TestBaselineDecidesAsPrevious(t *testing.T) {
	ctx := context.Background()
	old, err := BundleFromFS(os.DirFS("testdata/baseline-1.0.0"), BaselineID, "1.0.0")
	must(t, err)
	if d, err := old.Digest(); err != nil || d != baseline100Digest {
		t.Fatalf("testdata/baseline-1.0.0 has digest %s (%v), 1.0.0 was recorded as %s", d, err, baseline100Digest)
	}
	oldEngine, err := New(ctx, old, newMemRecorder(), nil)
	must(t, err)
	cur, err := New(ctx, Baseline(), newMemRecorder(), nil)
	must(t, err)
	type step struct {
		name string
		in   *Input
	}
	var steps []step
	for _, c := range loadBaselineCases(t) {
		steps = append(steps, step{c.Name, c.input(t)})
	}
	for i, in := range mixInputs(t) {
		steps = append(steps, step{"mix: " + trafficMix[i].command, in})
	}
	for _, c := range steps {
		in := c.in
		want, err := oldEngine.Decide(ctx, in)
		must(t, err)
		got, err := cur.Decide(ctx, in)
		must(t, err)
		for i := range want.PolicyReferences {
			want.PolicyReferences[i].PolicyVersion = BaselineVersion
		}
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if string(g) != string(w) || string(got.NDBuiltinCache) != string(want.NDBuiltinCache) {
			t.Errorf("%s:\n got %s\nwant %s (as 1.0.0)", c.name, g, w)
		}
	}
}
