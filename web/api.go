package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
)

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

func toSessionJSON(s ledger.Session) sessionJSON {
	return sessionJSON{s.SessionID, s.AgentID, s.Length, s.Head.String(), s.Writer, s.CreatedAt.UTC(), s.UpdatedAt.UTC()}
}

// appendEntry appends the request body, one ContextEntry, to the session
// named in the path. The agent id comes from the agent_id query parameter.
func (s *Server) appendEntry(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		s.fail(w, r, fmt.Errorf("couldn't read entry: %w", err))
		return
	}
	agentID := r.URL.Query().Get("agent_id")
	sessionID := pathParam(r, "session_id")
	if strings.HasPrefix(sessionID, AccessAgentID+"-") || agentID == AccessAgentID {
		// Only the server writes the access log, and no one may take the
		// id of a day it has not reached yet.
		s.fail(w, r, errReserved)
		return
	}
	p := principalFrom(r.Context())
	if p != nil && agentID != "" && !p.sees(agentID) {
		// A scoped token writes its own agents' sessions (the guard hid
		// the others).
		s.fail(w, r, errOutOfScope)
		return
	}
	if p != nil && p.Scope != "" && agentID == "" {
		// A scoped token's append that names no agent takes the agent of
		// the session, read on the primary, so that the store's agent
		// check keeps it there: a session another writer creates after
		// the scope check would otherwise take the entry. A new session
		// without an agent would be outside the scope.
		sess, err := s.writes.Session(r.Context(), sessionID)
		if errors.Is(err, ledger.ErrNotFound) {
			s.fail(w, r, errAgentRequired)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !p.sees(sess.AgentID) {
			// Created out of scope after the scope check: the same 404.
			s.fail(w, r, fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound))
			return
		}
		agentID = sess.AgentID
	}
	res, err := s.store.Append(r.Context(), ledger.Record{
		SessionID: sessionID,
		AgentID:   agentID,
		Entry:     body,
	})
	if err != nil {
		if hidden := s.outOfScope(r, sessionID, err); hidden != nil {
			s.fail(w, r, hidden)
			return
		}
		s.failAppend(w, r, err)
		return
	}
	code := http.StatusCreated
	if res.Replayed {
		code = http.StatusOK
	}
	writeJSON(w, code, appendedJSON{res.SessionID, res.Position, res.EntryHash.String(), hashPtr(res.PreviousHash), res.Replayed})
}

// outOfScope returns the scope check's 404 for an append the store
// refused because the session belongs to another agent or writer, when
// the session is outside the token's scope: nil otherwise. The scope check
// (checkSession) passed, so the session was created between it and the
// append, by a writer the token may not see; the store's 409 would tell
// the token that the session exists, and an agent mismatch's text names
// the session's agent. The store's own words go to the log, which names
// sessions and agents but holds no secret.
func (s *Server) outOfScope(r *http.Request, sessionID string, err error) error {
	p := principalFrom(r.Context())
	if p == nil || !errors.Is(err, ledger.ErrAgentMismatch) && !errors.Is(err, ledger.ErrWriterMismatch) {
		return nil
	}
	hidden := s.checkSession(r.Context(), p, sessionID, true)
	if errors.Is(hidden, ledger.ErrNotFound) {
		s.log.Info("append refused as an unknown session: the session was created out of the token's scope after the scope check",
			"who", p.Name, "session_id", sessionID, "err", err)
	}
	return hidden
}

// failAppend reports an append error with the values a writer needs to act
// on it: both hashes for a mismatch, the stored entry for a conflict.
func (s *Server) failAppend(w http.ResponseWriter, r *http.Request, err error) {
	var mm *ledger.HashMismatchError
	var ce *ledger.ConflictError
	var wm *ledger.WriterMismatchError
	switch {
	case errors.As(err, &wm):
		// The session is the Guardian's: its chain holds only what the
		// Guardian decided and signed.
		writeJSON(w, statusFor(err), map[string]any{"error": err.Error(), "owner": wm.Owner, "writer": wm.Writer})
	case errors.As(err, &mm):
		writeJSON(w, statusFor(err), map[string]any{
			"error": err.Error(), "member": mm.Member, "position": mm.Position,
			"expected": hashPtr(mm.Expected), "actual": hashPtr(mm.Actual),
		})
	case errors.As(err, &ce):
		writeJSON(w, statusFor(err), map[string]any{
			"error": err.Error(), "step_id": ce.StepID, "position": ce.Position, "entry_hash": ce.EntryHash.String(),
		})
	default:
		s.fail(w, r, err)
	}
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.store.Session(r.Context(), pathParam(r, "session_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(sess))
}

// listSessions filters by agent_id, step_type, since and until (RFC 3339)
// and pages with limit and cursor.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ledger.SessionFilter{AgentID: q.Get("agent_id"), StepType: q.Get("step_type"), Cursor: q.Get("cursor")}
	var err error
	if f.Since, err = timeParam(q.Get("since"), "since"); err == nil {
		if f.Until, err = timeParam(q.Get("until"), "until"); err == nil {
			f.Limit, err = intParam(q.Get("limit"), "limit")
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.store.Sessions(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Sessions []sessionJSON `json:"sessions"`
		Next     string        `json:"next,omitempty"`
	}{Sessions: []sessionJSON{}, Next: page.Next}
	p := principalFrom(r.Context())
	for _, ss := range page.Sessions {
		// The access log is listed when asked for by its agent id only;
		// sessions out of the caller's scope are left out, so a scoped
		// page may hold fewer than limit sessions and still have a next.
		if ss.AgentID == AccessAgentID && f.AgentID != AccessAgentID || p != nil && !p.sees(ss.AgentID) {
			continue
		}
		out.Sessions = append(out.Sessions, toSessionJSON(ss))
	}
	writeJSON(w, http.StatusOK, out)
}

// listEntries returns a page of a session's entries in chain order. With
// format=jsonl it streams the whole chain instead, one complete ContextEntry
// per line with entry_hash and previous_hash restored: the input of
// `acsverify chain`.
func (s *Server) listEntries(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "session_id")
	q := r.URL.Query()
	if q.Get("format") == "jsonl" {
		if p := principalFrom(r.Context()); p != nil && !slices.Contains(exportRoles, p.Role) {
			// The whole chain at once is an export, as a bundle is.
			refuse(w, r, failRole(p.Role))
			return
		}
		s.streamChain(w, r, id)
		return
	}
	from, err := intParam(q.Get("from"), "from")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, err := s.store.Entries(r.Context(), id, int64(from), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Entries []entryJSON `json:"entries"`
	}{Entries: []entryJSON{}}
	for _, e := range entries {
		out.Entries = append(out.Entries, entryJSON{
			e.SessionID, e.Position, e.EntryID, e.StepID, e.StepType, e.Timestamp, e.RecordedAt.UTC(),
			e.EntryHash.String(), hashPtr(e.PreviousHash), e.Content,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) streamChain(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := s.store.Session(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriter(w)
	for e, err := range ledger.AllEntries(r.Context(), s.store, id) {
		if err != nil {
			// The status line is gone; end the stream short so the reader's
			// chain check fails rather than passing on a truncated chain.
			s.log.Error("chain stream failed", "session", id, "err", err)
			fmt.Fprintf(bw, "{\"error\":%q}\n", "stream interrupted")
			break
		}
		bw.Write(evidence.FullEntry(e.Content, e.EntryHash, e.PreviousHash))
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// pathParam returns a path parameter decoded. chi matches on the escaped
// path when one exists, so an id holding "/" or "=" arrives still escaped
// ("a%2Fb"); a parameter that does not decode is kept as it came and
// simply finds nothing.
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

func timeParam(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: query parameter %s=%q is not an RFC 3339 time", errBadRequest, name, v)
	}
	return t, nil
}

func intParam(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: query parameter %s=%q is not a non-negative integer", errBadRequest, name, v)
	}
	return n, nil
}
