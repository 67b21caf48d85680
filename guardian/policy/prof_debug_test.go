package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/open-policy-agent/opa/v1/profiler"
	"github.com/open-policy-agent/opa/v1/rego"
)

func TestProfDebug(t *testing.T) {
	ctx := context.Background()
	e, _ := New(ctx, Baseline(), newMemRecorder(), nil)
	in := toolCall(t, "bash", "git push origin feature/login && rm -rf ./build")
	v, _, _ := in.value()
	p := profiler.New()
	for range 20 {
		e.cur.Load().query.Eval(ctx, rego.EvalParsedInput(v), rego.EvalQueryTracer(p))
	}
	for _, r := range p.ReportTopNResults(15, []string{"total_time_ns"}) {
		fmt.Printf("%8.2fms %6d %s:%d\n", float64(r.ExprTimeNs)/20e6, r.NumEval/20, r.Location.File, r.Location.Row)
	}
}
