package pgstore

import (
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

// Replans returns the number of transactions retried after losing a race.
func (s *Store) Replans() int64 { return s.replans.Load() }

// FailWritesOf makes every write transaction holding an entry of sessionID
// fail, as a database error would.
func (s *Store) FailWritesOf(sessionID string, err error) {
	s.beforeWrite = func(p *plan.Plan) error {
		for _, r := range p.Rows {
			if r.SessionID == sessionID {
				return err
			}
		}
		return nil
	}
}

// The step lookups, for their query plans.
var QueryEntriesByStep, QueryEntryByStep = shared.EntriesByStep, shared.EntryByStep

// QuerySessionLeaves and QueryLastSessionLeaf are the Merkle log's reads of
// one session's leaves, for plan tests.
var QuerySessionLeaves, QueryLastSessionLeaf = shared.LogSessionLeaves, shared.LogLastSessionLeaf

// SearchQuery is the text and arguments of SearchEntries' first page, for
// plan tests.
func SearchQuery(f ledger.SearchFilter) (string, []any) {
	query, args, err := sqlstore.SearchEntriesQuery(dialect{}, shared, f, 101)
	if err != nil {
		panic(err)
	}
	return query, args
}

// QueryEntries is a session's page of entries, for its plan test.
var QueryEntries = shared.Entries

// QueryStoredBySteps is the planning lookup of stored steps, for its plan
// test.
var QueryStoredBySteps = q.StoredBySteps
