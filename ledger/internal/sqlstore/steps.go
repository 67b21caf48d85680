package sqlstore

import (
	"context"
	"strings"

	"github.com/acsledger/acsledger/ledger"
)

// RecordedSteps implements ledger.RecordedStepReader.
func (s *Store) RecordedSteps(ctx context.Context, f ledger.StepFilter) ([]ledger.RecordedStep, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	w := searchWhere(s.dl, f.Search(), ledger.PageSize(f.Limit))
	if f.SessionID != "" {
		w.and("session_id = " + w.param(f.SessionID))
	}
	if f.After > 0 {
		w.and("id > " + w.param(f.After))
	}
	query := strings.Replace(s.q.RecordedSteps, "FILTERS", w.sql.String(), 1)
	steps, err := listRows(ctx, s, "couldn't read recorded steps", query, w.args, func(r Rows, st *ledger.RecordedStep) error {
		e := &st.Entry
		var eh, ph []byte
		var hasParams, erased bool
		if err := r.Scan(&st.Seq, &st.AgentID, &st.ToolName, &st.Source, &st.Disposition,
			&e.SessionID, &e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, s.dl.ScanTime(&e.RecordedAt),
			&e.Content, &eh, &ph, &hasParams, &st.Params, &st.Response, &erased); err != nil {
			return err
		}
		e.RecordedAt = e.RecordedAt.UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = HashPtr(ph)
		switch {
		case hasParams:
			if st.Params == nil {
				st.Params = []byte{} // SQLite reads an empty blob as NULL
			}
			p, err := s.opts.OpenParams(e.SessionID, e.Position, st.Params)
			if err != nil {
				return err
			}
			st.Params = p
		case erased:
			// Rare, so the erasure's record is read only then, once the
			// page's rows are closed.
			st.Erased = &ledger.Erasure{SessionID: e.SessionID, Position: e.Position}
		default:
			st.Params = nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range steps {
		if er := steps[i].Erased; er != nil {
			if steps[i].Erased, err = s.readErasure(ctx, s.d.Reader(), er.SessionID, er.Position); err != nil {
				return nil, err
			}
		}
	}
	return steps, nil
}
