package pgstore

import (
	"context"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// Append implements ledger.Store through group commit: concurrent appends
// share transactions, and each returns after the one holding its entry has
// committed (synchronous_commit=on: durable).
func (s *Store) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, err
	}
	a, _, err := s.committer.Append(ctx, p)
	return a, err
}
