package whatif

import (
	"context"

	"github.com/open-policy-agent/opa/v1/rego"
)

// BareQuery is the candidate's data.acs.decision as a prepared OPA query,
// for the benchmark's bare OPA.
func (c *Candidate) BareQuery(ctx context.Context) (*rego.PreparedEvalQuery, error) {
	return c.query(ctx, "acs/decision")
}
