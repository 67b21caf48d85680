package sqlstore

import (
	"context"
	"fmt"

	"github.com/acsledger/acsledger/ledger"
)

var _ ledger.ExportStore = (*Store)(nil)

// ExportEntries implements ledger.ExportStore.
func (s *Store) ExportEntries(ctx context.Context, f ledger.ExportFilter) ([]ledger.ExportEntry, error) {
	if f.To <= f.From {
		return nil, nil
	}
	limit := f.Limit
	if limit <= 0 || limit > ledger.MaxExportPage {
		limit = ledger.MaxExportPage
	}
	out := make([]ledger.ExportEntry, 0, min(limit, int(f.To-f.From)))
	err := s.eachRow(ctx, s.q.ExportEntries, []any{int64(f.From), int64(f.To), f.AgentPrefix, limit, f.WithParams}, func(r Rows) error {
		var e ledger.ExportEntry
		var idx int64
		var eh []byte
		if err := r.Scan(&idx, &e.SessionID, &e.Position, &eh, &e.AgentID, &e.Source,
			s.dl.ScanTime(&e.RecordedAt), &e.Content, &e.Response, &e.Params); err != nil {
			return err
		}
		if len(eh) != len(e.EntryHash) {
			return fmt.Errorf("leaf %d: entry has a %d-byte entry_hash", idx, len(eh))
		}
		e.LeafIndex = uint64(idx)
		copy(e.EntryHash[:], eh)
		e.RecordedAt = e.RecordedAt.UTC()
		if e.Params != nil {
			p, err := s.opts.OpenParams(e.SessionID, e.Position, e.Params)
			if err != nil {
				return fmt.Errorf("leaf %d: %w", idx, err)
			}
			e.Params = p
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't read entries of leaves [%d, %d) for export: %w", f.From, f.To, err)
	}
	return out, nil
}

// ExportCursor implements ledger.ExportStore.
func (s *Store) ExportCursor(ctx context.Context, name string) (ledger.ExportCursor, error) {
	c, err := s.scanCursor(s.d.Reader().QueryRow(ctx, s.q.ExportCursor, name))
	if noRows(err) {
		return c, fmt.Errorf("export cursor %q: %w", name, ledger.ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("couldn't read export cursor %q: %w", name, err)
	}
	return c, nil
}

// ExportCursors implements ledger.ExportStore.
func (s *Store) ExportCursors(ctx context.Context) ([]ledger.ExportCursor, error) {
	return listRows(ctx, s, "couldn't list export cursors", s.q.ExportCursors, nil, func(r Rows, c *ledger.ExportCursor) error {
		var err error
		*c, err = s.scanCursor(r)
		return err
	})
}

func (s *Store) scanCursor(row Row) (ledger.ExportCursor, error) {
	var c ledger.ExportCursor
	var next, to int64
	err := row.Scan(&c.Name, &next, &to, &c.Acknowledged, &c.SentUnconfirmed, &c.Resent, s.dl.ScanTime(&c.UpdatedAt))
	c.Next, c.SentTo, c.UpdatedAt = uint64(next), uint64(to), c.UpdatedAt.UTC()
	return c, err
}

// PutExportCursor implements ledger.ExportStore.
func (s *Store) PutExportCursor(ctx context.Context, c ledger.ExportCursor, expectNext uint64) error {
	if c.SentTo < c.Next {
		return fmt.Errorf("export cursor %q: sent to leaf %d, before its next leaf %d", c.Name, c.SentTo, c.Next)
	}
	n, err := s.d.Writer().Exec(ctx, s.q.PutExportCursor, c.Name, int64(c.Next), int64(c.SentTo),
		c.Acknowledged, c.SentUnconfirmed, c.Resent, s.dl.Time(c.UpdatedAt), int64(expectNext))
	if err != nil {
		return fmt.Errorf("couldn't save export cursor %q at leaf %d: %w", c.Name, c.Next, err)
	}
	if n == 0 {
		return fmt.Errorf("export cursor %q: expected it at leaf %d: %w", c.Name, expectNext, ledger.ErrCursorMoved)
	}
	return nil
}

// LogSize implements ledger.ExportStore.
func (s *Store) LogSize(ctx context.Context) (uint64, error) {
	var size int64
	if err := s.d.Reader().QueryRow(ctx, s.q.LogSize).Scan(&size); err != nil {
		return 0, fmt.Errorf("couldn't read log size: %w", err)
	}
	return uint64(size), nil
}
