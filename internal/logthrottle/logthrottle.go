// Package logthrottle keeps a failing dependency from flooding the log: a
// slog.Handler that passes each distinct warning or error message at most
// once per interval, and counts the repeats it held back into the next
// line it passes. An outage that fails every request then costs a line per
// message per interval, not one per request, and the count still says how
// many requests failed.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RepeatedKey is the attribute that carries how many records with the
// same message were held back since the previous one passed.
const RepeatedKey = "repeated"

// Handler wraps another slog.Handler. Records below slog.LevelWarn always
// pass. A warning or error passes when no record with its level and
// message passed within the interval; otherwise it is counted and dropped.
type Handler struct {
	next  slog.Handler
	state *state
}

type state struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[key]*window
}

type key struct {
	level slog.Level
	msg   string
}

type window struct {
	passed time.Time
	held   int
}

// maxKeys bounds the messages remembered; past it the memory starts over
// (messages are constants in code, so this is never reached in practice).
const maxKeys = 1024

// New returns a Handler passing each warning or error message at most once
// per every, timed by now (nil means time.Now).
func New(next slog.Handler, every time.Duration, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{next: next, state: &state{every: every, now: now, seen: map[key]*window{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	held, pass := h.state.admit(key{r.Level, r.Message})
	if !pass {
		return nil
	}
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(RepeatedKey, held))
	}
	return h.next.Handle(ctx, r)
}

// admit reports whether a record with k passes now and, if it does, how
// many were held back before it.
func (s *state) admit(k key) (held int, pass bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.seen[k]
	if !ok {
		if len(s.seen) >= maxKeys {
			s.seen = map[key]*window{}
		}
		s.seen[k] = &window{passed: now}
		return 0, true
	}
	if now.Sub(w.passed) < s.every {
		w.held++
		return 0, false
	}
	held, w.held, w.passed = w.held, 0, now
	return held, true
}

// WithAttrs implements slog.Handler; the derived handler shares the
// intervals, so a message logged through loggers with different
// attributes is still one message.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), state: h.state}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), state: h.state}
}
