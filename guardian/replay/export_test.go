package replay

import (
	"context"
	"fmt"

	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
)

// PolicyInput is the policy input Replay evaluates for req, for tests
// that compare it with the live one.
func PolicyInput(ctx context.Context, store Store, req Request) (*policy.Input, []string, error) {
	e, err := FindEntry(ctx, store, req.RequestID, req.SessionID)
	if err != nil {
		return nil, nil, err
	}
	rec, err := readEntry(e)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{}
	params, err := requestParams(ctx, store, e, rec, req, res)
	if err != nil {
		return nil, nil, err
	}
	gin, err := guardianInput(ctx, store, e, rec, req, params, res)
	if err != nil {
		return nil, nil, fmt.Errorf("guardian input: %w", err)
	}
	in, err := opapolicy.BuildInput(gin)
	return in, res.NotReconstructed, err
}
