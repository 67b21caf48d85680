package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// DailyStats counts entries by disposition and sessions created, per UTC
// day since since, leaving out the agent exclude.
func (s *Store) DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error) {
	days := map[time.Time]*ledger.DayStats{}
	day := func(t time.Time) *ledger.DayStats {
		t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		d, ok := days[t]
		if !ok {
			d = &ledger.DayStats{Day: t, Decisions: map[string]int64{}}
			days[t] = d
		}
		return d
	}
	err := s.eachRow(ctx, s.q.DailyDecisions, []any{s.dl.Time(since), exclude}, func(r Rows) error {
		var t time.Time
		var disp string
		var n int64
		if err := r.Scan(s.dl.ScanTime(&t), &disp, &n); err != nil {
			return err
		}
		d := day(t.UTC())
		d.Decisions[disp] += n
		d.Entries += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't count decisions per day: %w", err)
	}
	err = s.eachRow(ctx, s.q.DailySessions, []any{s.dl.Time(since), exclude}, func(r Rows) error {
		var t time.Time
		var n int64
		if err := r.Scan(s.dl.ScanTime(&t), &n); err != nil {
			return err
		}
		day(t.UTC()).Sessions = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't count sessions per day: %w", err)
	}
	return ledger.SortedDays(days), nil
}

// TreeSizes returns the sizes of the newest n checkpoints, oldest first.
func (s *Store) TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error) {
	out := []ledger.TreeSize{}
	err := s.eachRow(ctx, s.q.TreeSizes, []any{n}, func(r Rows) error {
		var size int64
		var at time.Time
		if err := r.Scan(&size, s.dl.ScanTime(&at)); err != nil {
			return err
		}
		out = append(out, ledger.TreeSize{Size: uint64(size), At: at.UTC()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't read checkpoint sizes: %w", err)
	}
	return out, nil
}

// QuarantineCount counts the ingest quarantine's records; ok is false when
// the database has no quarantine (ingest's migration has not run).
func (s *Store) QuarantineCount(ctx context.Context) (n int64, ok bool, err error) {
	r := s.d.Reader()
	if err := r.QueryRow(ctx, s.q.HasQuarantine).Scan(&ok); err != nil || !ok {
		return 0, false, err
	}
	if err := r.QueryRow(ctx, s.q.CountQuarantined).Scan(&n); err != nil {
		return 0, true, fmt.Errorf("couldn't count quarantined records: %w", err)
	}
	return n, true, nil
}

// trimPage cuts rows, read with a LIMIT one past the page size, to limit,
// and when that extra row was there returns the cursor of the last row
// kept, cursor(limit-1); on the last page it returns "".
func trimPage[T any](rows []T, limit int, cursor func(i int) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	return rows[:limit], cursor(limit - 1)
}

// listRows runs a read and returns what scan makes of each row, in order
// (nil for none). Its error is "<failed>: <cause>".
func listRows[T any](ctx context.Context, s *Store, failed, query string, args []any, scan func(Rows, *T) error) ([]T, error) {
	var out []T
	err := s.eachRow(ctx, query, args, func(r Rows) error {
		var v T
		err := scan(r, &v)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", failed, err)
	}
	return out, nil
}

// eachRow runs a read and calls fn on each row it returns.
func (s *Store) eachRow(ctx context.Context, query string, args []any, fn func(Rows) error) error {
	rows, err := s.d.Reader().Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
