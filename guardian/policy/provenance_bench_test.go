package policy

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkDecideSessionProvenance measures one benign tool call as the
// provenance the input carries grows (Input.Provenance, up to the
// Guardian's 4,096 objects): the engine's cost of a large input, whose
// objects the Guardian now hands over only when they are in the step's
// lineage (see opapolicy's BenchmarkDecisionProvenance); the 0 case is the
// baseline in the same run.
func BenchmarkDecideSessionProvenance(b *testing.B) {
	ctx := context.Background()
	e, err := New(ctx, Baseline(), newMemRecorder(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 64, 512, 4096} {
		in := toolCall(b, "bash", "go test ./...")
		for i := range n {
			in.Provenance = append(in.Provenance, Provenance{ProvenanceID: fmt.Sprintf("p-%d", i), Origin: "tool_output", SourceID: "read_file"})
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := e.Decide(ctx, in)
				if err != nil || d.Disposition != Allow {
					b.Fatal(d, err)
				}
			}
		})
	}
}
