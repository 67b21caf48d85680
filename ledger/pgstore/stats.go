package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

//go:embed stats.sql
var statsSQL string

type statsQueries struct {
	DailyDecisions, DailySessions, TreeSizes, HasQuarantine, Quarantined string
}

var stq = sqlq.Load[statsQueries](statsSQL)

// DailyStats counts entries by disposition and sessions created, per UTC
// day since since, leaving out the agent exclude.
func (s *Store) DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error) {
	days := map[time.Time]*ledger.DayStats{}
	var order []time.Time
	day := func(t time.Time) *ledger.DayStats {
		t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		d, ok := days[t]
		if !ok {
			d = &ledger.DayStats{Day: t, Decisions: map[string]int64{}}
			days[t] = d
			order = append(order, t)
		}
		return d
	}
	rows, err := s.pool.Query(ctx, stq.DailyDecisions, since, exclude)
	if err != nil {
		return nil, fmt.Errorf("couldn't count decisions per day: %w", err)
	}
	for rows.Next() {
		var t time.Time
		var disp string
		var n int64
		if err := rows.Scan(&t, &disp, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("couldn't count decisions per day: %w", err)
		}
		d := day(t)
		d.Decisions[disp] += n
		d.Entries += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't count decisions per day: %w", err)
	}
	rows, err = s.pool.Query(ctx, stq.DailySessions, since, exclude)
	if err != nil {
		return nil, fmt.Errorf("couldn't count sessions per day: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t time.Time
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, fmt.Errorf("couldn't count sessions per day: %w", err)
		}
		day(t).Sessions = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't count sessions per day: %w", err)
	}
	return ledger.SortedDays(days), nil
}

// TreeSizes returns the sizes of the newest n checkpoints, oldest first.
func (s *Store) TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error) {
	rows, err := s.pool.Query(ctx, stq.TreeSizes, n)
	if err != nil {
		return nil, fmt.Errorf("couldn't read checkpoint sizes: %w", err)
	}
	defer rows.Close()
	out := []ledger.TreeSize{}
	for rows.Next() {
		var ts ledger.TreeSize
		if err := rows.Scan(&ts.Size, &ts.At); err != nil {
			return nil, fmt.Errorf("couldn't read checkpoint sizes: %w", err)
		}
		ts.At = ts.At.UTC()
		out = append(out, ts)
	}
	return out, rows.Err()
}

// QuarantineCount counts the ingest quarantine's records; ok is false when
// the database has no quarantine (ingest's migration has not run).
func (s *Store) QuarantineCount(ctx context.Context) (n int64, ok bool, err error) {
	if err := s.pool.QueryRow(ctx, stq.HasQuarantine).Scan(&ok); err != nil || !ok {
		return 0, false, err
	}
	if err := s.pool.QueryRow(ctx, stq.Quarantined).Scan(&n); err != nil {
		return 0, true, fmt.Errorf("couldn't count quarantined records: %w", err)
	}
	return n, true, nil
}
