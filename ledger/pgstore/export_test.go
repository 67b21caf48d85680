package pgstore

import (
	"strings"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
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
var QueryEntriesByStep, QueryEntryByStep = q.EntriesByStep, q.EntryByStep

// QuerySessionLeaves and QueryLastSessionLeaf are the Merkle log's reads of
// one session's leaves, for plan tests.
var QuerySessionLeaves, QueryLastSessionLeaf = q.LogSessionLeaves, q.LogLastSessionLeaf

// SearchQuery is the text and arguments of SearchEntries' first page, for
// plan tests.
func SearchQuery(f ledger.SearchFilter) (string, []any) {
	w := searchWhere(f, 101)
	return strings.Replace(sq.SearchEntries, "FILTERS", w.sql.String(), 1), w.args
}

// QueryEntries is a session's page of entries, for its plan test.
var QueryEntries = q.Entries

// QueryStoredBySteps is the planning lookup of stored steps, for its plan
// test.
var QueryStoredBySteps = q.StoredBySteps
