package api

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// The compliance search (docs/api.md, "Search"; docs/ui.md): entries or
// sessions by agent, time, decision, reason code, policy, tool, source,
// flags and reasoning text, one keyset page at a time, or exported whole
// as CSV or JSON Lines, streamed page by page so memory stays flat
// however many rows match. Each hit links to the bundle that proves it.

// Searcher is the search over the ledger's projection (migration 0010).
// Both stores implement it. SearchEntries returns entries newest first,
// SearchSessions sessions in id order; both return an error matching
// ledger.ErrInvalidSearch for a filter or cursor they refuse.
type Searcher interface {
	SearchEntries(ctx context.Context, f ledger.SearchFilter) (ledger.SearchPage, error)
	SearchSessions(ctx context.Context, f ledger.SearchFilter) (ledger.SessionSearchPage, error)
}

// errNoSearch answers the search routes of a server given no Searcher
// (the chart routes of web/stats say the same without their Charts).
var errNoSearch = httpapi.NewError(http.StatusNotImplemented, "this server was given no search or charts over its store")

// searchFilter reads a search from the query: the parameters docs/api.md
// lists. A scoped credential only ever searches its own agents, and the
// access log is searched only when asked for by its agent id.
func searchFilter(r *http.Request) (ledger.SearchFilter, error) {
	q := r.URL.Query()
	f := ledger.SearchFilter{
		AgentID: q.Get("agent_id"), Disposition: strings.ToLower(q.Get("decision")), ReasonCode: q.Get("reason_code"),
		PolicyID: q.Get("policy_id"), PolicyVersion: q.Get("policy_version"), ToolName: q.Get("tool"),
		Source: q.Get("source"), Flag: q.Get("flag"), Text: q.Get("q"), Cursor: q.Get("cursor"),
	}
	var err error
	if f.Since, err = httpapi.TimeParam(q.Get("since"), "since"); err != nil {
		return f, err
	}
	if f.Until, err = httpapi.TimeParam(q.Get("until"), "until"); err != nil {
		return f, err
	}
	if f.Limit, err = httpapi.IntParam(q.Get("limit"), "limit"); err != nil {
		return f, err
	}
	if f.AgentID != access.LogAgentID {
		f.ExcludeAgent = access.LogAgentID
	}
	if p := access.PrincipalFrom(r.Context()); p != nil {
		if f.AgentID == access.LogAgentID && !p.Sees(access.LogAgentID) {
			return f, access.ErrOutOfScope
		}
		f.AgentPrefix = p.Scope
	}
	return f, nil
}

// searchAs reads as=entries|sessions; entries by default.
func searchAs(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("as"); v {
	case "", "entries":
		return "entries", nil
	case "sessions":
		return v, nil
	default:
		return "", fmt.Errorf("%w: query parameter as=%q is not entries or sessions", httpapi.ErrBadRequest, v)
	}
}

// hitJSON is one matching entry, with the links that prove and show it.
type hitJSON struct {
	SessionID   string    `json:"session_id"`
	Position    int64     `json:"position"`
	AgentID     string    `json:"agent_id"`
	RecordedAt  time.Time `json:"recorded_at"`
	StepID      string    `json:"step_id"`
	StepType    string    `json:"step_type"`
	Decision    string    `json:"decision"`
	ReasonCodes []string  `json:"reason_codes"`
	PolicyRefs  []string  `json:"policy_refs"`
	Tool        string    `json:"tool"`
	Source      string    `json:"source"`
	Flags       []string  `json:"flags"`
	Reasoning   string    `json:"reasoning"`
	Bundle      string    `json:"bundle"`
}

// sessionHitJSON is one session holding matches.
type sessionHitJSON struct {
	SessionID string    `json:"session_id"`
	AgentID   string    `json:"agent_id"`
	Matches   int64     `json:"matches"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
	Bundle    string    `json:"bundle"`
}

func bundleLink(sessionID string) string {
	return "/api/v1/sessions/" + url.PathEscape(sessionID) + "/bundle"
}

func toHitJSON(h ledger.SearchHit) hitJSON {
	nz := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return hitJSON{h.SessionID, h.Position, h.AgentID, h.RecordedAt, h.StepID, h.StepType, h.Disposition,
		nz(h.ReasonCodes), nz(h.PolicyRefs), h.ToolName, h.Source, nz(h.Flags), h.Reasoning, bundleLink(h.SessionID)}
}

func toSessionHitJSON(h ledger.SessionHit) sessionHitJSON {
	return sessionHitJSON{h.SessionID, h.AgentID, h.Matches, h.First, h.Last, bundleLink(h.SessionID)}
}

// searchRequest reads what a search asks for (as=entries|sessions and the
// filter), answering the request itself when it cannot be served.
func (a *API) searchRequest(w http.ResponseWriter, r *http.Request) (as string, f ledger.SearchFilter, ok bool) {
	if a.search == nil {
		a.fail(w, r, errNoSearch)
		return "", f, false
	}
	as, err := searchAs(r)
	if err == nil {
		f, err = searchFilter(r)
	}
	if err != nil {
		a.fail(w, r, err)
		return "", f, false
	}
	return as, f, true
}

// searchPage answers one page of hits.
func (a *API) searchPage(w http.ResponseWriter, r *http.Request) {
	as, f, ok := a.searchRequest(w, r)
	if !ok {
		return
	}
	hits, next, err := a.searchOnce(r.Context(), as, f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if as == "sessions" {
		httpapi.WriteJSON(w, http.StatusOK, struct {
			Sessions []hit  `json:"sessions"`
			Next     string `json:"next,omitempty"`
		}{hits, next})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Entries []hit  `json:"entries"`
		Next    string `json:"next,omitempty"`
	}{hits, next})
}

// hit is one row of a search's answer: a hitJSON or a sessionHitJSON.
type hit interface {
	// csvRow is the hit's row in a CSV export (exportColumns).
	csvRow() []string
}

func (j hitJSON) csvRow() []string {
	return []string{j.SessionID, strconv.FormatInt(j.Position, 10), j.AgentID,
		j.RecordedAt.Format(time.RFC3339Nano), j.StepID, j.StepType, j.Decision,
		strings.Join(j.ReasonCodes, " "), strings.Join(j.PolicyRefs, " "), j.Tool, j.Source,
		strings.Join(j.Flags, " "), j.Reasoning, j.Bundle}
}

func (j sessionHitJSON) csvRow() []string {
	return []string{j.SessionID, j.AgentID, strconv.FormatInt(j.Matches, 10),
		j.First.Format(time.RFC3339Nano), j.Last.Format(time.RFC3339Nano), j.Bundle}
}

// searchOnce reads one page of the search: sessions holding matches when
// as is "sessions", else matching entries.
func (a *API) searchOnce(ctx context.Context, as string, f ledger.SearchFilter) (hits []hit, next string, err error) {
	if as == "sessions" {
		page, err := a.search.SearchSessions(ctx, f)
		return hitsOf(page.Sessions, func(h ledger.SessionHit) hit { return toSessionHitJSON(h) }), page.Next, err
	}
	page, err := a.search.SearchEntries(ctx, f)
	return hitsOf(page.Hits, func(h ledger.SearchHit) hit { return toHitJSON(h) }), page.Next, err
}

// hitsOf is a page's rows as hits; never nil, so that an empty page
// answers [].
func hitsOf[T any](rows []T, toHit func(T) hit) []hit {
	hits := make([]hit, 0, len(rows))
	for _, r := range rows {
		hits = append(hits, toHit(r))
	}
	return hits
}

// exportSearch streams every hit of a search, format=csv or format=json
// (JSON Lines: one hit per line, as the search answers it). It reads
// ledger.MaxPageSize hits at a time, so memory stays flat however many
// match. A failure after the first byte ends the stream with an error
// line (JSON) or an "error" record (CSV), never silently short.
func (a *API) exportSearch(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if format != "csv" && format != "json" {
		a.fail(w, r, fmt.Errorf("%w: query parameter format=%q is not csv or json", httpapi.ErrBadRequest, format))
		return
	}
	as, f, ok := a.searchRequest(w, r)
	if !ok {
		return
	}
	f.Limit = ledger.MaxPageSize
	ex := newExporter(w, as, format)
	for {
		hits, next, err := a.searchOnce(r.Context(), as, f)
		if err != nil {
			a.failExport(w, r, ex, err)
			return
		}
		if err := ex.write(hits); err != nil {
			// The client went away.
			return
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	ex.flush()
}

// exportColumns are the CSV header rows, by result kind.
var exportColumns = map[string][]string{
	"entries":  {"session_id", "position", "agent_id", "recorded_at", "step_id", "step_type", "decision", "reason_codes", "policy_refs", "tool", "source", "flags", "reasoning", "bundle"},
	"sessions": {"session_id", "agent_id", "matches", "first", "last", "bundle"},
}

// exporter writes an export's header on its first write, so that an
// error before any row still gets its own status.
type exporter struct {
	w       http.ResponseWriter
	as      string
	format  string
	bw      *bufio.Writer
	cw      *csv.Writer
	enc     *json.Encoder
	started bool
}

func newExporter(w http.ResponseWriter, as, format string) *exporter {
	return &exporter{w: w, as: as, format: format}
}

func (e *exporter) start() {
	e.started = true
	name := "acsledger-search-" + e.as
	if e.format == "csv" {
		e.w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		name += ".csv"
	} else {
		e.w.Header().Set("Content-Type", "application/x-ndjson")
		name += ".jsonl"
	}
	e.w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	e.w.WriteHeader(http.StatusOK)
	e.bw = bufio.NewWriterSize(e.w, 64<<10)
	if e.format == "csv" {
		e.cw = csv.NewWriter(e.bw)
		e.cw.Write(exportColumns[e.as])
	} else {
		e.enc = json.NewEncoder(e.bw)
		e.enc.SetEscapeHTML(false)
	}
}

func (e *exporter) write(hits []hit) error {
	if !e.started {
		e.start()
	}
	if e.format == "csv" {
		for _, h := range hits {
			row := h.csvRow()
			// A cell starting with = + - @ is a formula to a spreadsheet:
			// exported evidence must not run in the auditor's.
			for i, c := range row {
				if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
					row[i] = "'" + c
				}
			}
			e.cw.Write(row)
		}
		e.cw.Flush()
		return e.cw.Error()
	}
	for _, h := range hits {
		if err := e.enc.Encode(h); err != nil {
			return err
		}
	}
	return nil
}

// flush ends the export; write has run at least once, so the header is
// out.
func (e *exporter) flush() {
	if e.cw != nil {
		e.cw.Flush()
	}
	e.bw.Flush()
}

func (a *API) failExport(w http.ResponseWriter, r *http.Request, e *exporter, err error) {
	if !e.started {
		a.fail(w, r, err)
		return
	}
	a.log.Error("search export failed", "err", err)
	if e.format == "csv" {
		e.cw.Write([]string{"error", "export interrupted"})
		e.cw.Flush()
	} else {
		fmt.Fprintf(e.bw, "{\"error\":%q}\n", "export interrupted")
	}
	e.bw.Flush()
}

// Integrity states of a session, at a glance (docs/ui.md).
const (
	// IntegrityVerified: the last whole-ledger re-verification, finished
	// after the session's last append, found nothing, and its newest
	// entry is in the log's latest checkpoint.
	IntegrityVerified = "verified"
	// IntegrityFindings: the last re-verification named the session.
	IntegrityFindings = "findings"
	// IntegrityNotAnchored: the session's newest entry is not in the
	// log's latest checkpoint yet (or the server has no log).
	IntegrityNotAnchored = "not_anchored"
	// IntegrityUnchecked: anchored, but not re-verified since its last
	// append (or the last run could not list every failing session).
	IntegrityUnchecked = "unchecked"
)

// integrityJSON is one session's state and what it rests on.
type integrityJSON struct {
	SessionID string   `json:"session_id"`
	State     string   `json:"state"`
	Codes     []string `json:"codes,omitempty"`
}

// maxIntegrityIDs bounds one integrity request: a page of a list.
const maxIntegrityIDs = ledger.DefaultPageSize

// integrity answers the integrity state of up to maxIntegrityIDs sessions
// (repeated session_id): from the last re-verification run's results and
// the log's anchoring, one indexed lookup per session, never a full
// verification per row.
func (a *API) integrity(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["session_id"]
	if len(ids) > maxIntegrityIDs {
		a.fail(w, r, fmt.Errorf("%w: at most %d session_id parameters", httpapi.ErrBadRequest, maxIntegrityIDs))
		return
	}
	_, last := a.opts.Reverifier.Status()
	var size uint64
	if a.opts.Log != nil {
		cp, err := a.opts.Log.Checkpoint(r.Context())
		if err == nil {
			if c, err := verify.ParseCheckpointHead(cp); err == nil {
				size = c.Size
			}
		} else if !errors.Is(err, ledger.ErrNotFound) {
			a.fail(w, r, fmt.Errorf("couldn't read the latest checkpoint: %w", err))
			return
		}
	}
	p := access.PrincipalFrom(r.Context())
	out := struct {
		Sessions []integrityJSON `json:"sessions"`
	}{Sessions: []integrityJSON{}}
	for _, id := range ids {
		sess, err := a.store.Session(r.Context(), id)
		if errors.Is(err, ledger.ErrNotFound) || err == nil && p != nil && !p.Sees(sess.AgentID) {
			continue
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		out.Sessions = append(out.Sessions, a.integrityOf(r.Context(), sess, size, last))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (a *API) integrityOf(ctx context.Context, sess ledger.Session, size uint64, last *evidence.RunStatus) integrityJSON {
	ij := integrityJSON{SessionID: sess.SessionID}
	if last != nil {
		if i := slices.IndexFunc(last.FailedSessions, func(f evidence.FailedSession) bool { return f.SessionID == sess.SessionID }); i >= 0 {
			ij.State, ij.Codes = IntegrityFindings, last.FailedSessions[i].Codes
			return ij
		}
	}
	anchored := false
	if a.opts.Log != nil && size > 0 {
		if leaf, err := a.opts.Log.LastSessionLeaf(ctx, sess.SessionID, size); err == nil {
			anchored = leaf.Position == sess.Length-1
		}
	}
	switch {
	case !anchored:
		ij.State = IntegrityNotAnchored
	case last != nil && !last.Running && last.Error == "" && last.Started.After(sess.UpdatedAt) &&
		int64(len(last.FailedSessions)) == last.Failed:
		ij.State = IntegrityVerified
	default:
		ij.State = IntegrityUnchecked
	}
	return ij
}
