package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// claim inserts the replay keys of ps in tx and returns the records whose
// key the session had already seen.
func claim(ctx context.Context, tx *sql.Tx, ps []plan.Prepared) (map[int]error, error) {
	var refused map[int]error
	for i, p := range ps {
		if p.Seen == nil {
			continue
		}
		res, err := tx.ExecContext(ctx, q.RecordRequest, p.SessionID, p.Seen.RequestID, p.Seen.Nonce, p.Seen.At.UnixMicro())
		if err != nil {
			return nil, fmt.Errorf("couldn't record request %q of session %q: %w", p.Seen.RequestID, p.SessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			if refused == nil {
				refused = make(map[int]error)
			}
			refused[i] = plan.ReplayError(p.SessionID, *p.Seen)
		}
	}
	return refused, nil
}
