package sqlstore

import (
	"context"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// SearchEntries returns one page of the entries f selects, newest first
// (ledger/search.go).
func (s *Store) SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error) {
	if err := f.Check(); err != nil {
		return ledger.SearchPage{}, err
	}
	limit := ledger.PageSize(f.Limit)
	query, args, err := SearchEntriesQuery(s.dl, s.q, f, limit+1)
	if err != nil {
		return ledger.SearchPage{}, err
	}
	hits, err := listRows(ctx, s, "couldn't search entries", query, args, func(r Rows, hit *ledger.SearchHit) error {
		var h ledger.SearchHit
		var seq int64
		if err := r.Scan(&seq, &h.SessionID, &h.Position, &h.AgentID, s.dl.ScanTime(&h.RecordedAt), &h.StepID, &h.StepType,
			&h.Disposition, s.dl.ScanList(&h.ReasonCodes), s.dl.ScanList(&h.PolicyRefs), &h.ToolName, &h.Source,
			s.dl.ScanList(&h.Flags), &h.Reasoning); err != nil {
			return err
		}
		h.RecordedAt = h.RecordedAt.UTC()
		h.PolicyRefs = ledger.VersionedRefs(h.PolicyRefs)
		*hit = ledger.NewSearchHit(h, seq)
		return nil
	})
	if err != nil {
		return ledger.SearchPage{}, err
	}
	var page ledger.SearchPage
	page.Hits, page.Next = trimPage(hits, limit, func(i int) string { return ledger.EntryCursor(hits[i]) })
	return page, nil
}

// SearchEntriesQuery is the text and arguments of SearchEntries for f,
// with the page's LIMIT limit.
func SearchEntriesQuery(dl Dialect, q *Queries, f ledger.SearchFilter, limit int) (string, []any, error) {
	after, ok, err := ledger.ParseEntryCursor(f.Cursor)
	if err != nil {
		return "", nil, err
	}
	w := searchWhere(dl, f, limit)
	if ok {
		w.and("id < " + w.param(after))
	}
	return strings.Replace(q.SearchEntries, "FILTERS", w.sql.String(), 1), w.args, nil
}

// SearchSessions returns one page of the sessions holding entries f
// selects, in session id order.
func (s *Store) SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error) {
	if err := f.Check(); err != nil {
		return ledger.SessionSearchPage{}, err
	}
	after, err := ledger.ParseSessionCursor(f.Cursor)
	if err != nil {
		return ledger.SessionSearchPage{}, err
	}
	limit := ledger.PageSize(f.Limit)
	w := searchWhere(s.dl, f, limit+1)
	if after != "" {
		w.and("session_id > " + w.param(after))
	}
	query := strings.Replace(s.q.SearchSessions, "FILTERS", w.sql.String(), 1)
	sessions, err := listRows(ctx, s, "couldn't search sessions", query, w.args, func(r Rows, h *ledger.SessionHit) error {
		err := r.Scan(&h.SessionID, &h.AgentID, &h.Matches, s.dl.ScanTime(&h.First), s.dl.ScanTime(&h.Last))
		h.First, h.Last = h.First.UTC(), h.Last.UTC()
		return err
	})
	if err != nil {
		return ledger.SessionSearchPage{}, err
	}
	var page ledger.SessionSearchPage
	page.Sessions, page.Next = trimPage(sessions, limit, func(i int) string { return ledger.SessionCursor(sessions[i].SessionID) })
	return page, nil
}

// where collects conditions with numbered parameters; the first is the
// limit.
type where struct {
	dl   Dialect
	sql  strings.Builder
	args []any
}

// param adds v as the next argument and returns its placeholder.
func (w *where) param(v any) string {
	w.args = append(w.args, v)
	return w.dl.Param(len(w.args))
}

// and appends " AND cond".
func (w *where) and(cond string) {
	w.sql.WriteString(" AND ")
	w.sql.WriteString(cond)
}

func searchWhere(dl Dialect, f ledger.SearchFilter, limit int) *where {
	w := &where{dl: dl, args: []any{limit}}
	eq := func(col, v string) {
		if v != "" {
			w.and(col + " = " + w.param(v))
		}
	}
	has := func(col, v string) {
		if v != "" {
			w.and(dl.Contains(col, w.param(v)))
		}
	}
	eq("agent_id", f.AgentID)
	if f.AgentPrefix != "" {
		w.and(dl.HasPrefix("agent_id", w.param(f.AgentPrefix)))
	}
	if f.ExcludeAgent != "" {
		w.and("agent_id <> " + w.param(f.ExcludeAgent))
	}
	if !f.Since.IsZero() {
		w.and("recorded_at >= " + w.param(dl.Time(f.Since.UTC().Truncate(time.Microsecond))))
	}
	if !f.Until.IsZero() {
		w.and("recorded_at < " + w.param(dl.Time(f.Until.UTC().Truncate(time.Microsecond))))
	}
	eq("disposition", f.Disposition)
	has("reason_codes", f.ReasonCode)
	has("policy_refs", f.PolicyRef())
	eq("tool_name", f.ToolName)
	eq("source", f.Source)
	has("flags", f.Flag)
	if f.Text != "" {
		w.and(dl.TextMatch("reasoning", w.param(dl.TextArg(f.Text))))
	}
	return w
}
