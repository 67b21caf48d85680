package sqlitestore

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

//go:embed search.sql
var searchSQL string

type searchQueries struct{ SearchEntries, SearchSessions string }

var sq = sqlq.Load[searchQueries](searchSQL)

// SearchEntries returns one page of the entries f selects, newest first
// (ledger/search.go).
func (s *Store) SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error) {
	if err := f.Check(); err != nil {
		return ledger.SearchPage{}, err
	}
	after, ok, err := ledger.ParseEntryCursor(f.Cursor)
	if err != nil {
		return ledger.SearchPage{}, err
	}
	limit := ledger.PageSize(f.Limit)
	w := searchWhere(f, limit+1)
	if ok {
		w.add("id < ?%d", after)
	}
	rows, err := s.read.QueryContext(ctx, strings.Replace(sq.SearchEntries, "FILTERS", w.sql.String(), 1), w.args...)
	if err != nil {
		return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: %w", err)
	}
	defer rows.Close()
	var page ledger.SearchPage
	for rows.Next() {
		var h ledger.SearchHit
		var seq, at int64
		var codes, refs, flags string
		if err := rows.Scan(&seq, &h.SessionID, &h.Position, &h.AgentID, &at, &h.StepID, &h.StepType,
			&h.Disposition, &codes, &refs, &h.ToolName, &h.Source, &flags, &h.Reasoning); err != nil {
			return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: %w", err)
		}
		h.RecordedAt = time.UnixMicro(at).UTC()
		for _, l := range []struct {
			src string
			dst *[]string
		}{{codes, &h.ReasonCodes}, {refs, &h.PolicyRefs}, {flags, &h.Flags}} {
			if err := json.Unmarshal([]byte(l.src), l.dst); err != nil {
				return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: a projected list of session %q: %w", h.SessionID, err)
			}
		}
		h.PolicyRefs = ledger.VersionedRefs(h.PolicyRefs)
		page.Hits = append(page.Hits, ledger.NewSearchHit(h, seq))
	}
	if err := rows.Err(); err != nil {
		return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: %w", err)
	}
	if len(page.Hits) > limit {
		page.Hits = page.Hits[:limit]
		page.Next = ledger.EntryCursor(page.Hits[limit-1])
	}
	return page, nil
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
	w := searchWhere(f, limit+1)
	if after != "" {
		w.add("session_id > ?%d", after)
	}
	rows, err := s.read.QueryContext(ctx, strings.Replace(sq.SearchSessions, "FILTERS", w.sql.String(), 1), w.args...)
	if err != nil {
		return ledger.SessionSearchPage{}, fmt.Errorf("couldn't search sessions: %w", err)
	}
	defer rows.Close()
	var page ledger.SessionSearchPage
	for rows.Next() {
		var h ledger.SessionHit
		var first, last int64
		if err := rows.Scan(&h.SessionID, &h.AgentID, &h.Matches, &first, &last); err != nil {
			return ledger.SessionSearchPage{}, fmt.Errorf("couldn't search sessions: %w", err)
		}
		h.First, h.Last = time.UnixMicro(first).UTC(), time.UnixMicro(last).UTC()
		page.Sessions = append(page.Sessions, h)
	}
	if err := rows.Err(); err != nil {
		return ledger.SessionSearchPage{}, fmt.Errorf("couldn't search sessions: %w", err)
	}
	if len(page.Sessions) > limit {
		page.Sessions = page.Sessions[:limit]
		page.Next = ledger.SessionCursor(page.Sessions[limit-1].SessionID)
	}
	return page, nil
}

// where collects conditions with numbered parameters; ?1 is the limit.
type where struct {
	sql  strings.Builder
	args []any
}

// add appends " AND cond", cond holding ?%d for the value's parameter.
func (w *where) add(cond string, v any) {
	w.args = append(w.args, v)
	w.sql.WriteString(" AND ")
	w.sql.WriteString(strings.ReplaceAll(cond, "%d", strconv.Itoa(len(w.args))))
}

func searchWhere(f ledger.SearchFilter, limit int) *where {
	w := &where{args: []any{limit}}
	eq := func(col, v string) {
		if v != "" {
			w.add(col+" = ?%d", v)
		}
	}
	has := func(col, v string) {
		if v != "" {
			w.add("EXISTS (SELECT 1 FROM json_each("+col+") WHERE value = ?%d)", v)
		}
	}
	eq("agent_id", f.AgentID)
	if f.AgentPrefix != "" {
		w.add("substr(agent_id, 1, length(?%d)) = ?%d", f.AgentPrefix)
	}
	if f.ExcludeAgent != "" {
		w.add("agent_id <> ?%d", f.ExcludeAgent)
	}
	if !f.Since.IsZero() {
		w.add("recorded_at >= ?%d", f.Since.UnixMicro())
	}
	if !f.Until.IsZero() {
		w.add("recorded_at < ?%d", f.Until.UnixMicro())
	}
	eq("disposition", f.Disposition)
	has("reason_codes", f.ReasonCode)
	has("policy_refs", f.PolicyRef())
	eq("tool_name", f.ToolName)
	eq("source", f.Source)
	has("flags", f.Flag)
	if f.Text != "" {
		// lower() folds ASCII only in SQLite; the Postgres store folds
		// all of Unicode.
		w.add("instr(lower(reasoning), lower(?%d)) > 0", f.Text)
	}
	return w
}
