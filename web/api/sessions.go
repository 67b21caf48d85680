package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// exportRoles may take a session's chain whole (entries?format=jsonl), as
// they may take its bundle: a viewer sees entries page by page in the UI
// and exports nothing.
var exportRoles = []access.Role{access.RoleAdmin, access.RoleAuditor}

type appendedJSON struct {
	SessionID    string  `json:"session_id"`
	Position     int64   `json:"position"`
	EntryHash    string  `json:"entry_hash"`
	PreviousHash *string `json:"previous_hash"`
	Replayed     bool    `json:"replayed"`
}

type sessionJSON struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	Length    int64  `json:"length"`
	Head      string `json:"chain_hash"`
	// Writer owns the session: "guardian" (this ledger's Guardian) or
	// "external" (the plain append API, ingest).
	Writer    string    `json:"writer"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type entryJSON struct {
	SessionID    string          `json:"session_id"`
	Position     int64           `json:"position"`
	EntryID      string          `json:"entry_id"`
	StepID       string          `json:"step_id"`
	StepType     string          `json:"step_type"`
	Timestamp    string          `json:"timestamp,omitempty"`
	RecordedAt   time.Time       `json:"recorded_at"`
	EntryHash    string          `json:"entry_hash"`
	PreviousHash *string         `json:"previous_hash"`
	Entry        json.RawMessage `json:"entry"`
}

func hashPtr(h *acs.Hash) *string {
	if h == nil {
		return nil
	}
	s := h.String()
	return &s
}

func toEntryJSON(e ledger.Entry) entryJSON {
	return entryJSON{
		e.SessionID, e.Position, e.EntryID, e.StepID, e.StepType, e.Timestamp, e.RecordedAt.UTC(),
		e.EntryHash.String(), hashPtr(e.PreviousHash), e.Content,
	}
}

func toSessionJSON(s ledger.Session) sessionJSON {
	return sessionJSON{s.SessionID, s.AgentID, s.Length, s.Head.String(), s.Writer, s.CreatedAt.UTC(), s.UpdatedAt.UTC()}
}

// appendEntry appends the request body, one ContextEntry, to the session
// named in the path. The agent id comes from the agent_id query parameter.
func (a *API) appendEntry(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		a.fail(w, r, fmt.Errorf("couldn't read entry: %w", err))
		return
	}
	agentID := r.URL.Query().Get("agent_id")
	sessionID := httpapi.PathParam(r, "session_id")
	if access.ReservedSession(sessionID) || access.Reserved(agentID) {
		// Only the server writes the access log, and no one may take the
		// id of a day it has not reached yet.
		a.fail(w, r, access.ErrReserved)
		return
	}
	p := access.PrincipalFrom(r.Context())
	if p != nil && agentID != "" && !p.Sees(agentID) {
		// A scoped token writes its own agents' sessions (the guard hid
		// the others).
		a.fail(w, r, access.ErrOutOfScope)
		return
	}
	if p != nil && p.Scope != "" && agentID == "" {
		// A scoped token's append that names no agent takes the agent of
		// the session, read on the primary, so that the store's agent
		// check keeps it there: a session another writer creates after
		// the scope check would otherwise take the entry. A new session
		// without an agent would be outside the scope.
		sess, err := a.writes.Session(r.Context(), sessionID)
		if errors.Is(err, ledger.ErrNotFound) {
			a.fail(w, r, access.ErrAgentRequired)
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if !p.Sees(sess.AgentID) {
			// Created out of scope after the scope check: the same 404.
			a.fail(w, r, fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound))
			return
		}
		agentID = sess.AgentID
	}
	res, err := a.store.Append(r.Context(), ledger.Record{
		SessionID: sessionID,
		AgentID:   agentID,
		Entry:     body,
	})
	if err != nil {
		if hidden := a.outOfScope(r, sessionID, err); hidden != nil {
			a.fail(w, r, hidden)
			return
		}
		a.failAppend(w, r, err)
		return
	}
	code := http.StatusCreated
	if res.Replayed {
		code = http.StatusOK
	}
	httpapi.WriteJSON(w, code, appendedJSON{res.SessionID, res.Position, res.EntryHash.String(), hashPtr(res.PreviousHash), res.Replayed})
}

// outOfScope returns the scope check's 404 for an append the store
// refused because the session belongs to another agent or writer, when
// the session is outside the token's scope: nil otherwise. The scope check
// (access.CheckSession) passed, so the session was created between it and the
// append, by a writer the token may not see; the store's 409 would tell
// the token that the session exists, and an agent mismatch's text names
// the session's agent. The store's own words go to the log, which names
// sessions and agents but holds no secret.
func (a *API) outOfScope(r *http.Request, sessionID string, err error) error {
	p := access.PrincipalFrom(r.Context())
	if p == nil || !errors.Is(err, ledger.ErrAgentMismatch) && !errors.Is(err, ledger.ErrWriterMismatch) {
		return nil
	}
	hidden := access.CheckSession(r.Context(), a.writes, p, sessionID, true)
	if errors.Is(hidden, ledger.ErrNotFound) {
		a.log.Info("append refused as an unknown session: the session was created out of the token's scope after the scope check",
			"who", p.Name, "session_id", sessionID, "err", err)
	}
	return hidden
}

// failAppend reports an append error with the values a writer needs to act
// on it: both hashes for a mismatch, the stored entry for a conflict.
func (a *API) failAppend(w http.ResponseWriter, r *http.Request, err error) {
	var mm *ledger.HashMismatchError
	var ce *ledger.ConflictError
	var wm *ledger.WriterMismatchError
	switch {
	case errors.As(err, &wm):
		// The session is the Guardian's: its chain holds only what the
		// Guardian decided and signed.
		httpapi.WriteJSON(w, httpapi.StatusFor(err), map[string]any{"error": err.Error(), "owner": wm.Owner, "writer": wm.Writer})
	case errors.As(err, &mm):
		httpapi.WriteJSON(w, httpapi.StatusFor(err), map[string]any{
			"error": err.Error(), "member": mm.Member, "position": mm.Position,
			"expected": hashPtr(mm.Expected), "actual": hashPtr(mm.Actual),
		})
	case errors.As(err, &ce):
		httpapi.WriteJSON(w, httpapi.StatusFor(err), map[string]any{
			"error": err.Error(), "step_id": ce.StepID, "position": ce.Position, "entry_hash": ce.EntryHash.String(),
		})
	default:
		a.fail(w, r, err)
	}
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := a.store.Session(r.Context(), httpapi.PathParam(r, "session_id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, toSessionJSON(sess))
}

// listSessions filters by agent_id, step_type, since and until (RFC 3339)
// and pages with limit and cursor.
func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ledger.SessionFilter{AgentID: q.Get("agent_id"), StepType: q.Get("step_type"), Cursor: q.Get("cursor")}
	var err error
	if f.Since, err = httpapi.TimeParam(q.Get("since"), "since"); err == nil {
		if f.Until, err = httpapi.TimeParam(q.Get("until"), "until"); err == nil {
			f.Limit, err = httpapi.IntParam(q.Get("limit"), "limit")
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.store.Sessions(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := struct {
		Sessions []sessionJSON `json:"sessions"`
		Next     string        `json:"next,omitempty"`
	}{Sessions: []sessionJSON{}, Next: page.Next}
	p := access.PrincipalFrom(r.Context())
	for _, ss := range page.Sessions {
		// The access log is listed when asked for by its agent id only;
		// sessions out of the caller's scope are left out, so a scoped
		// page may hold fewer than limit sessions and still have a next.
		if ss.AgentID == access.LogAgentID && f.AgentID != access.LogAgentID || p != nil && !p.Sees(ss.AgentID) {
			continue
		}
		out.Sessions = append(out.Sessions, toSessionJSON(ss))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// listEntries returns a page of a session's entries in chain order. With
// format=jsonl it streams the whole chain instead, one complete ContextEntry
// per line with entry_hash and previous_hash restored: the input of
// `acsverify chain`.
func (a *API) listEntries(w http.ResponseWriter, r *http.Request) {
	id := httpapi.PathParam(r, "session_id")
	q := r.URL.Query()
	if q.Get("format") == "jsonl" {
		if p := access.PrincipalFrom(r.Context()); p != nil && !slices.Contains(exportRoles, p.Role) {
			// The whole chain at once is an export, as a bundle is.
			access.RefuseRole(w, r, p.Role)
			return
		}
		a.streamChain(w, r, id)
		return
	}
	entries, err := a.entriesPage(r, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpapi.WriteList(w, "entries", entries, toEntryJSON)
}

// entriesPage reads the page of a session's entries that the query's
// from (a position) and limit ask for.
func (a *API) entriesPage(r *http.Request, sessionID string) ([]ledger.Entry, error) {
	q := r.URL.Query()
	from, err := httpapi.IntParam(q.Get("from"), "from")
	if err != nil {
		return nil, err
	}
	limit, err := httpapi.IntParam(q.Get("limit"), "limit")
	if err != nil {
		return nil, err
	}
	return a.store.Entries(r.Context(), sessionID, int64(from), limit)
}

func (a *API) streamChain(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := a.store.Session(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriter(w)
	for e, err := range ledger.AllEntries(r.Context(), a.store, id) {
		if err != nil {
			// The status line is gone; end the stream short so the reader's
			// chain check fails rather than passing on a truncated chain.
			a.log.Error("chain stream failed", "session", id, "err", err)
			fmt.Fprintf(bw, "{\"error\":%q}\n", "stream interrupted")
			break
		}
		bw.Write(evidence.FullEntry(e.Content, e.EntryHash, e.PreviousHash))
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// fail answers err with its status; internal errors are logged and their
// text is not shown to the client.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { httpapi.Fail(a.log, w, r, err) }
