//go:build drills

package drills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger/evidence"
)

// Chain is one session's chain as the evidence API returns it, every link
// recomputed with package acs.
type Chain struct {
	Session string
	Entries int
	// Steps counts the entries of each step_id (the request_id of a
	// Guardian step, "opa:<decision_id>" of an ingested OPA decision).
	Steps map[string]int
	// Heads maps each entry_hash to its step_id.
	Heads map[string]string
}

// ReadChain reads a session's whole chain (format=jsonl) and fails t if a
// link does not recompute. A session the ledger does not know is empty.
func (s *Server) ReadChain(t testing.TB, session string) Chain {
	t.Helper()
	c := Chain{Session: session, Steps: map[string]int{}, Heads: map[string]string{}}
	code, body := s.Do(t, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(session)+"/entries?format=jsonl", nil)
	if code == http.StatusNotFound {
		return c
	}
	if code != http.StatusOK {
		t.Fatalf("entries of %s: %d %s", session, code, body)
	}
	var prev *acs.Hash
	for i, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := acs.ParseEntry(line)
		if err != nil {
			t.Fatalf("%s entry %d: %v", session, i, err)
		}
		if (prev == nil) != (e.PreviousHash == nil) || prev != nil && *prev != *e.PreviousHash {
			t.Fatalf("%s entry %d: previous_hash %v, want %v: the chain is broken", session, i, e.PreviousHash, prev)
		}
		h := acs.EntryHash(e.Content, prev)
		if e.EntryHash == nil || *e.EntryHash != h {
			t.Fatalf("%s entry %d: entry_hash %v, recomputed %s", session, i, e.EntryHash, h)
		}
		c.Steps[e.StepID]++
		c.Heads[h.String()] = e.StepID
		prev = &h
		c.Entries++
	}
	return c
}

// ReadChains reads the chains of sessions, keyed by session.
func (s *Server) ReadChains(t testing.TB, sessions []string) map[string]Chain {
	t.Helper()
	out := make(map[string]Chain, len(sessions))
	for _, id := range sessions {
		out[id] = s.ReadChain(t, id)
	}
	return out
}

// Report is what a drill found of a load's answers in the ledger.
type Report struct {
	// Answered signed answers published a chain head; InLedger of them
	// are in the ledger under that head and step.
	Answered, InLedger int
	// Unrecorded signed answers published no head (the failure posture's
	// DENY or error); UnrecordedCommitted of them are in the ledger all
	// the same (the commit went through, its acknowledgement was lost).
	Unrecorded, UnrecordedCommitted int
	// InFlight requests got no answer: the fault cut them. Committed of
	// them are in the ledger.
	InFlight, Committed int
	// Duplicates is the number of steps stored more than once.
	Duplicates int
	// Entries in the sessions read; Unexplained of them are neither an
	// answered step nor a step that was committed without its answer
	// arriving (0 when every request of the sessions is among the answers
	// checked).
	Entries, Unexplained int64
}

// Check compares answers with the chains read back: every answered step
// must be stored under the head its answer published, and no step twice.
// It fails t otherwise and returns the counts either way.
func Check(t testing.TB, answers []Answer, chains map[string]Chain) Report {
	t.Helper()
	var r Report
	for _, c := range chains {
		r.Entries += int64(c.Entries)
		for step, n := range c.Steps {
			if n > 1 {
				r.Duplicates++
				t.Errorf("session %s: step %s stored %d times", c.Session, step, n)
			}
		}
	}
	for _, a := range answers {
		c := chains[a.Session]
		stored := c.Steps[a.RequestID] > 0
		switch {
		case a.Recorded():
			r.Answered++
			if c.Heads[a.ChainHash] == a.RequestID {
				r.InLedger++
			} else {
				t.Errorf("session %s: step %s was answered with head %s, which the ledger does not hold for it", a.Session, a.RequestID, a.ChainHash)
			}
		case a.Err == nil:
			r.Unrecorded++
			if stored {
				r.UnrecordedCommitted++
			}
		case a.InFlight():
			r.InFlight++
			if stored {
				r.Committed++
			}
		case stored:
			t.Errorf("session %s: step %s never reached a server, yet the ledger holds it", a.Session, a.RequestID)
		}
	}
	r.Unexplained = r.Entries - int64(r.InLedger+r.Committed+r.UnrecordedCommitted)
	return r
}

// String is the counts as the summary line prints them.
func (r Report) String() string {
	return fmt.Sprintf("answered %d, in ledger %d, in flight %d (committed %d), unrecorded answers %d (committed %d), duplicates %d, entries %d (unexplained %d)",
		r.Answered, r.InLedger, r.InFlight, r.Committed, r.Unrecorded, r.UnrecordedCommitted, r.Duplicates, r.Entries, r.Unexplained)
}

// Reverification is the result of a whole-ledger re-verification run
// (GET /api/v1/admin/reverify), decoded into the type the server encodes.
type Reverification struct{ evidence.RunStatus }

// Green reports whether the run checked every session and found nothing.
func (r Reverification) Green() bool {
	return r.Error == "" && r.Failed == 0 && r.LoggedNotStored == 0 && !r.Finished.IsZero()
}

func (r Reverification) String() string {
	s := fmt.Sprintf("%d sessions, %d entries, %d failed", r.Sessions, r.Entries, r.Failed)
	if r.LoggedNotStored > 0 {
		s += fmt.Sprintf(", %d logged but not stored", r.LoggedNotStored)
	}
	for _, f := range r.FailedSessions {
		s += fmt.Sprintf("; %s: %s", f.SessionID, strings.Join(f.Codes, ","))
	}
	if r.Error != "" {
		s += "; error: " + r.Error
	}
	return s
}

// Reverify runs the server's whole-ledger re-verification (every chain,
// signed head, policy reference, checkpoint and inclusion proof) through
// the admin API and returns its result once it finished.
func (s *Server) Reverify(t testing.TB) Reverification {
	t.Helper()
	code, body := s.Do(t, http.MethodPost, "/api/v1/admin/reverify", nil)
	if code != http.StatusAccepted {
		t.Fatalf("POST /api/v1/admin/reverify: %d %s", code, body)
	}
	var st struct {
		Current *Reverification `json:"current"`
		Last    *Reverification `json:"last"`
	}
	if err := json.Unmarshal(body, &st); err != nil || st.Current == nil {
		t.Fatalf("POST /api/v1/admin/reverify: %v %s", err, body)
	}
	started := st.Current.Started
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body = s.Do(t, http.MethodGet, "/api/v1/admin/reverify", nil)
		st.Current, st.Last = nil, nil
		if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
			t.Fatalf("GET /api/v1/admin/reverify: %d %v %s", code, err, body)
		}
		if st.Current == nil && st.Last != nil && st.Last.Started.Equal(started) {
			return *st.Last
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-verification still running after 2 minutes: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
