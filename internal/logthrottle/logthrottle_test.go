package logthrottle_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/logthrottle"
)

// TestThrottle: within an interval a warning or error message passes once
// and its repeats are counted into the next line that passes; other
// messages, levels and info lines are not held back.
func TestThrottle(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	log := slog.New(logthrottle.New(slog.NewTextHandler(&buf, nil), 5*time.Second, func() time.Time { return now }))
	for i := range 1000 {
		log.Error("guardian: ledger failed", "request_id", i)
		log.With("component", "web").Error("request failed", "n", i)
	}
	log.Warn("guardian: ledger failed")
	log.Info("served")
	log.Info("served")
	now = now.Add(5 * time.Second)
	log.Error("guardian: ledger failed", "request_id", 1000)
	now = now.Add(time.Second)
	log.Error("guardian: ledger failed", "request_id", 1001)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="guardian: ledger failed" request_id=0`,
		`level=ERROR msg="request failed" component=web n=0`,
		`level=WARN msg="guardian: ledger failed"`,
		`level=INFO msg=served`,
		`level=INFO msg=served`,
		`level=ERROR msg="guardian: ledger failed" request_id=1000 repeated=999`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i], w)
		}
	}
}
