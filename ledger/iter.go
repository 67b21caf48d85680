package ledger

import (
	"context"
	"iter"
)

// AllEntries yields a session's entries in chain order, reading them from s a
// page at a time. It stops after the first error.
func AllEntries(ctx context.Context, s ChainReader, sessionID string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		var from int64
		for {
			page, err := s.Entries(ctx, sessionID, from, MaxPageSize)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if len(page) < MaxPageSize {
				return
			}
			from += int64(len(page))
		}
	}
}
