package api_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// racedStore is a store in which another writer's append lands between
// the scope check of an API append and the append itself: before runs
// first on the next Append, once. Only the order is arranged; both
// appends are the store's own.
type racedStore struct {
	web.Store
	mu     sync.Mutex
	before func()
}

// arm makes before run first on the next Append; nil disarms.
func (s *racedStore) arm(before func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = before
}

func (s *racedStore) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	s.mu.Lock()
	before := s.before
	s.before = nil
	s.mu.Unlock()
	if before != nil {
		before()
	}
	return s.Store.Append(ctx, r)
}

// lockedBuffer is a log the server writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func raceEntry(i int) []byte {
	return fmt.Appendf(nil, `{"entry_id":"e-%d","step_id":"req-%d","step_type":"steps/toolCallRequest","timestamp":"2026-12-01T10:00:%02dZ","decision":"allow"}`, i, i, i%60)
}

// TestAppendRacedOutOfScope: a session another team's writer creates
// between a scoped writer's scope check and its append answers that
// writer with the scope check's 404, as a session outside its scope
// does, not with the store's 409 naming the other team's agent; the
// server's log keeps the store's words. Within the token's scope, the
// store's 409 stands. An append naming no agent is held to its session's
// agent, so such a session does not take it either.
func TestAppendRacedOutOfScope(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { testAppendRacedOutOfScope(t, kind) })
	}
}

func testAppendRacedOutOfScope(t *testing.T, kind string) {
	f := evidencetest.New(t, kind)
	var ts web.Tokens = f.Store
	store := &racedStore{Store: f.Store}
	var logs lockedBuffer
	h := web.New(store, web.Options{Auth: web.AuthOptions{Tokens: ts, NoAccessLog: true}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	base := webtest.Serve(t, h)
	teamA := webtest.Token(t, ts, web.TokenRequest{Name: "team-a-writer", Role: web.RoleWriter, Scope: "team-a/"})
	appendAs := func(session, agent string, i int) (int, string) {
		t.Helper()
		code, _, b := webtest.Do(t, http.MethodPost, base+"/api/v1/sessions/"+session+"/entries?agent_id="+agent, raceEntry(i),
			"Content-Type", "application/json", "Authorization", "Bearer "+teamA)
		return code, string(b)
	}
	createdBy := func(session, agent string) func() {
		return func() {
			if _, err := f.Store.Append(context.Background(), ledger.Record{SessionID: session, AgentID: agent, Entry: raceEntry(100)}); err != nil {
				t.Errorf("the racing append to %s: %v", session, err)
			}
		}
	}

	// What the scope check answers for a session of another team that
	// existed before the request.
	createdBy("known-b", "team-b/secret-bot")()
	knownCode, known := appendAs("known-b", "team-a/bot", 1)
	if knownCode != http.StatusNotFound {
		t.Fatalf("scoped writer on another team's existing session: %d %s, want 404", knownCode, known)
	}

	store.arm(createdBy("raced-b", "team-b/secret-bot"))
	code, body := appendAs("raced-b", "team-a/bot", 2)
	if code != knownCode || strings.ReplaceAll(body, "raced-b", "known-b") != known {
		t.Errorf("scoped writer on another team's session created after the scope check: %d %s, want the 404 of an out-of-scope session: %s", code, body, known)
	}
	if strings.Contains(body, "team-b") {
		t.Errorf("the answer names the other team's agent: %s", body)
	}
	if s, err := f.Store.Session(context.Background(), "raced-b"); err != nil || s.Length != 1 || s.AgentID != "team-b/secret-bot" {
		t.Errorf("raced-b after the refused append: %+v %v, want team-b's one entry", s, err)
	}
	log := logs.String()
	if !strings.Contains(log, "raced-b") || !strings.Contains(log, `session belongs to agent \"team-b/secret-bot\"`) || !strings.Contains(log, "team-a-writer") {
		t.Errorf("the log lacks the store's refusal:\n%s", log)
	}
	if strings.Contains(log, teamA) {
		t.Errorf("the log shows the token:\n%s", log)
	}

	// An append naming no agent takes the session's, read after the
	// scope check: one to a session the scope check did not find is
	// refused before the store is asked, so another team's session
	// created in between cannot take the entry.
	store.arm(createdBy("raced-b2", "team-b/secret-bot"))
	code, body = appendAs("raced-b2", "", 4)
	store.arm(nil) // unused when the handler refused first
	if code != http.StatusForbidden || strings.Contains(body, "team-b") {
		t.Errorf("scoped writer naming no agent, a session created after the scope check: %d %s, want 403", code, body)
	}
	if s, err := f.Store.Session(context.Background(), "raced-b2"); err == nil && s.Length != 1 {
		t.Errorf("raced-b2 after the refused append: %+v, want team-b's one entry", s)
	}
	if code, body := appendAs("no-agent", "", 5); code != http.StatusForbidden || !strings.Contains(body, "names the agent_id") {
		t.Errorf("scoped writer creating a session with no agent: %d %s, want 403", code, body)
	}
	if code, body := appendAs("own-a", "team-a/bot", 6); code != http.StatusCreated {
		t.Fatalf("scoped writer, own new session: %d %s", code, body)
	}
	if code, body := appendAs("own-a", "", 7); code != http.StatusCreated || !strings.Contains(body, `"position":1`) {
		t.Errorf("scoped writer naming no agent on its own session: %d %s, want 201 at position 1", code, body)
	}

	// Within the scope the session's agent is the token's to see.
	store.arm(createdBy("raced-a", "team-a/other-bot"))
	code, body = appendAs("raced-a", "team-a/bot", 3)
	if code != http.StatusConflict || !strings.Contains(body, "team-a/other-bot") {
		t.Errorf("scoped writer on its own team's session of another agent: %d %s, want the store's 409 naming it", code, body)
	}
}
