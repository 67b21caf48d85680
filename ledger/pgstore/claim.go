package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// claimSQL inserts replay keys, skipping any that a stored key or an
// earlier one of the same statement already holds, and returns those it
// inserted. A key a concurrent transaction inserted waits for that one to
// end: skipped if it committed, inserted if it rolled back.
const claimSQL = `INSERT INTO requests (session_id, request_id, nonce, seen_at)
SELECT s, r, n, t FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS k(s, r, n, t)
ON CONFLICT DO NOTHING
RETURNING session_id, request_id`

// queueClaim queues the insert of ps's replay keys on b and sets *refused
// to the replays when the batch runs. It queues nothing when no record
// carries a key.
func queueClaim(b *pgx.Batch, ps []plan.Prepared, refused *map[int]error) {
	var ss, rs, ns []string
	var ts []time.Time
	for _, p := range ps {
		if p.Seen != nil {
			ss, rs, ns, ts = append(ss, p.SessionID), append(rs, p.Seen.RequestID), append(ns, p.Seen.Nonce), append(ts, p.Seen.At)
		}
	}
	if len(ss) == 0 {
		return
	}
	b.Queue(claimSQL, ss, rs, ns, ts).Query(func(rows pgx.Rows) error {
		inserted := make(map[plan.Key]bool, len(ss))
		for rows.Next() {
			var k plan.Key
			if err := rows.Scan(&k.SessionID, &k.StepID); err != nil {
				return err
			}
			inserted[k] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i, p := range ps {
			if p.Seen == nil {
				continue
			}
			k := plan.Key{SessionID: p.SessionID, StepID: p.Seen.RequestID}
			if inserted[k] {
				delete(inserted, k) // a later record with the same key is the replay
				continue
			}
			if *refused == nil {
				*refused = make(map[int]error)
			}
			(*refused)[i] = plan.ReplayError(p.SessionID, *p.Seen)
		}
		return nil
	})
}
