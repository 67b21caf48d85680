package pgstore

import (
	"context"
	_ "embed"
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
		w.add("id < $%d", after)
	}
	rows, err := s.pool.Query(ctx, strings.Replace(sq.SearchEntries, "FILTERS", w.sql.String(), 1), w.args...)
	if err != nil {
		return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: %w", err)
	}
	defer rows.Close()
	var page ledger.SearchPage
	for rows.Next() {
		var h ledger.SearchHit
		var seq int64
		if err := rows.Scan(&seq, &h.SessionID, &h.Position, &h.AgentID, &h.RecordedAt, &h.StepID, &h.StepType,
			&h.Disposition, &h.ReasonCodes, &h.PolicyRefs, &h.ToolName, &h.Source, &h.Flags, &h.Reasoning); err != nil {
			return ledger.SearchPage{}, fmt.Errorf("couldn't search entries: %w", err)
		}
		h.RecordedAt = h.RecordedAt.UTC()
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
		w.add("session_id > $%d", after)
	}
	rows, err := s.pool.Query(ctx, strings.Replace(sq.SearchSessions, "FILTERS", w.sql.String(), 1), w.args...)
	if err != nil {
		return ledger.SessionSearchPage{}, fmt.Errorf("couldn't search sessions: %w", err)
	}
	defer rows.Close()
	var page ledger.SessionSearchPage
	for rows.Next() {
		var h ledger.SessionHit
		if err := rows.Scan(&h.SessionID, &h.AgentID, &h.Matches, &h.First, &h.Last); err != nil {
			return ledger.SessionSearchPage{}, fmt.Errorf("couldn't search sessions: %w", err)
		}
		h.First, h.Last = h.First.UTC(), h.Last.UTC()
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

// where collects conditions with positional parameters; $1 is the limit.
type where struct {
	sql  strings.Builder
	args []any
}

// add appends " AND cond", cond holding one %d for the value's parameter
// number.
func (w *where) add(cond string, v any) {
	w.args = append(w.args, v)
	w.sql.WriteString(" AND ")
	w.sql.WriteString(strings.ReplaceAll(cond, "%d", strconv.Itoa(len(w.args))))
}

// likeEscaper makes text match itself in a LIKE pattern (backslash is
// PostgreSQL's default escape character).
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

func searchWhere(f ledger.SearchFilter, limit int) *where {
	w := &where{args: []any{limit}}
	eq := func(col, v string) {
		if v != "" {
			w.add(col+" = $%d", v)
		}
	}
	has := func(col, v string) {
		if v != "" {
			// "<> '{}'" matches the partial GIN indexes (migration 0013):
			// an array holding v is not empty.
			w.add(col+" @> ARRAY[$%d::text] AND "+col+" <> '{}'", v)
		}
	}
	eq("agent_id", f.AgentID)
	if f.AgentPrefix != "" {
		w.add("starts_with(agent_id, $%d)", f.AgentPrefix)
	}
	if f.ExcludeAgent != "" {
		w.add("agent_id <> $%d", f.ExcludeAgent)
	}
	if !f.Since.IsZero() {
		w.add("recorded_at >= $%d", f.Since.UTC().Truncate(time.Microsecond))
	}
	if !f.Until.IsZero() {
		w.add("recorded_at < $%d", f.Until.UTC().Truncate(time.Microsecond))
	}
	eq("disposition", f.Disposition)
	has("reason_codes", f.ReasonCode)
	has("policy_refs", f.PolicyRef())
	eq("tool_name", f.ToolName)
	eq("source", f.Source)
	has("flags", f.Flag)
	if f.Text != "" {
		// ILIKE, so that the trigram index (migration 0010) serves it;
		// "<> ''" matches the partial index (migration 0013): a text
		// holding f.Text is not empty.
		w.add("reasoning ILIKE $%d AND reasoning <> ''", "%"+likeEscaper.Replace(f.Text)+"%")
	}
	return w
}
