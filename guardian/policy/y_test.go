package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
)

func TestY(t *testing.T) {
	ctx := context.Background()
	b := Baseline()
	mods := map[string]*ast.Module{}
	for p, src := range b.Modules {
		mods[p], _ = ast.ParseModuleWithOpts(p, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	}
	var data map[string]any
	util.UnmarshalJSON(b.Data, &data)
	in := toolCall(t, "bash", "git push origin feature/login && rm -rf ./build")
	v, _, _ := in.value()
	for _, q := range []string{"data.acs.shell.normalized", "data.acs.shell.invocations", "data.acs.shell.findings", "data.acs.secrets.findings", "data.acs.flow.findings", "data.acs.tools.findings", "data.acs.call.args", "data.acs.decision"} {
		c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
		c.Compile(mods)
		pq, err := rego.New(rego.Query(q), rego.Compiler(c), rego.Store(inmem.NewFromObject(data))).PrepareForEval(ctx)
		if err != nil {
			t.Fatal(err)
		}
		best := time.Hour
		for range 5 {
			t0 := time.Now()
			for range 50 {
				pq.Eval(ctx, rego.EvalParsedInput(v))
			}
			best = min(best, time.Since(t0)/50)
		}
		fmt.Println(q, best)
	}
}
