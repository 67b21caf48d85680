package policy

import (
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// BenchmarkDecideSessionProvenance measures one benign tool call as the
// provenance the input carries grows (Input.Provenance, up to the
// Guardian's 4,096 objects): the engine's cost of a large input, whose
// objects the Guardian now hands over only when they are in the step's
// lineage (see opapolicy's BenchmarkDecisionProvenance); the 0 case is the
// baseline in the same run.
func BenchmarkDecideSessionProvenance(b *testing.B) {
	e := baselineEngine(b)
	for _, n := range []int{0, 64, 512, 4096} {
		in := toolCall(b, "bash", "go test ./...")
		for i := range n {
			in.Provenance = append(in.Provenance, Provenance{ProvenanceID: fmt.Sprintf("p-%d", i), Origin: "tool_output", SourceID: "read_file"})
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchDecide(b, e, in, acs.Allow)
		})
	}
}
