package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// BenchmarkScale loads 1,000,000 entries into a throwaway PostgreSQL with
// COPY (9,000 sessions of 100 entries and one of 100,000; 50 agents; 90
// days), through the same triggers an append fires, and measures the
// compliance searches and the first timeline page of the 100,000-entry
// session through the HTTP API. It fails a search slower than 500 ms or
// a first page slower than 1 s (median of 5). docs/benchmarks.md has the
// figures and the command:
//
//	make bench-scale
//
// It loads for minutes, so `make bench` (every benchmark once) leaves it
// out: it runs only with ACSLEDGER_BENCH_SCALE=1.
func BenchmarkScale(b *testing.B) {
	if os.Getenv("ACSLEDGER_BENCH_SCALE") == "" {
		b.Skip("loads 1,000,000 entries: run it with ACSLEDGER_BENCH_SCALE=1 (make bench-scale)")
	}
	ctx := context.Background()
	u := pgtest.NewDatabase(b)
	if err := storeopen.Migrate(ctx, u); err != nil {
		b.Fatal(err)
	}
	st, err := storeopen.Open(ctx, u, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	pool := st.(*pgstore.Store).Pool()
	start := time.Now()
	end := loadScale(b, pool)
	fmt.Printf("loaded %d entries with COPY in %s\n", scaleEntries, time.Since(start).Round(time.Second))

	srv := httptest.NewServer(New(st, Options{Search: st, Charts: st, Auth: AuthOptions{Bootstrap: webtest.AdminToken, NoAccessLog: true}}))
	defer srv.Close()
	base := srv.URL + "/api/v1"
	month := end.AddDate(0, -1, 0).UTC().Format(time.RFC3339)
	var next string
	type probe struct {
		name  string
		path  func() string
		limit time.Duration
	}
	probes := []probe{
		{"denials of one agent", func() string { return "/search?decision=deny&agent_id=agent-17" }, 500 * time.Millisecond},
		{"a reason code in the last month", func() string {
			return "/search?reason_code=remote_code_execution&since=" + url.QueryEscape(month)
		}, 500 * time.Millisecond},
		{"a policy version's denials", func() string { return "/search?policy_id=baseline&policy_version=1.0.2&decision=deny" }, 500 * time.Millisecond},
		{"a tool's denials", func() string { return "/search?tool=bash&decision=deny" }, 500 * time.Millisecond},
		{"an ingest source and flag", func() string { return "/search?source=bash-guard&flag=fail_open" }, 500 * time.Millisecond},
		{"reasoning text of one agent", func() string { return "/search?q=CURL&agent_id=agent-3" }, 500 * time.Millisecond},
		{"reasoning text alone, common", func() string { return "/search?q=exfiltration" }, 500 * time.Millisecond},
		{"reasoning text alone, one match in 1,000,000", func() string { return "/search?q=" + url.QueryEscape("step 99999:") }, 500 * time.Millisecond},
		{"sessions with denials", func() string { return "/search?as=sessions&decision=deny" }, 500 * time.Millisecond},
		{"second page of denials", func() string { return "/search?decision=deny&cursor=" + url.QueryEscape(next) }, 500 * time.Millisecond},
		{"no filter (newest)", func() string { return "/search" }, 500 * time.Millisecond},
		{"first timeline page of the 100,000-entry session", func() string { return "/sessions/big-session/steps?from=0&limit=100" }, time.Second},
		{"last timeline page of the 100,000-entry session", func() string { return "/sessions/big-session/steps?from=99900&limit=100" }, time.Second},
	}
	for _, p := range probes {
		var times []time.Duration
		var body []byte
		for range 5 {
			t0 := time.Now()
			code, _, bb := webtest.Do(b, "GET", base+p.path(), nil)
			times = append(times, time.Since(t0))
			if code != 200 {
				b.Fatalf("%s: %d %s", p.name, code, bb)
			}
			body = bb
		}
		var page struct {
			Entries  []json.RawMessage `json:"entries"`
			Sessions []json.RawMessage `json:"sessions"`
			Steps    []json.RawMessage `json:"steps"`
			Next     string            `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			b.Fatal(err)
		}
		if p.name == "denials of one agent" || p.name == "a tool's denials" {
			next = page.Next
		}
		if next == "" && p.name == "a tool's denials" {
			b.Fatalf("%s: no second page", p.name)
		}
		n := len(page.Entries) + len(page.Sessions) + len(page.Steps)
		if n == 0 {
			b.Errorf("%s: nothing found", p.name)
		}
		slices.Sort(times)
		// Printed, not logged: a benchmark's log is cut after a few lines.
		fmt.Printf("| %s | %d | %.1f ms | %.1f ms |\n", p.name, n, ms(times[2]), ms(times[4]))
		if times[2] > p.limit {
			b.Errorf("%s: median %s, over %s", p.name, times[2], p.limit)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

const (
	scaleEntries  = 1_000_000
	scaleBig      = 100_000
	scaleSessions = (scaleEntries - scaleBig) / 100
	scaleAgents   = 50
	scaleDays     = 90
)

var (
	scaleTools   = []string{"bash", "read_file", "write_file", "list_dir", "http_get", "send_email", "sql_query", "git_push", "deploy", "search_web", "memory_write", "calendar"}
	scaleReasons = []string{"remote_code_execution", "secret_in_arguments", "exfiltration_risk", "destructive_command", "policy_default"}
)

// loadScale writes the sessions, entries (real entry hashes, chained),
// heads and request params with COPY, and returns the newest recorded_at.
// Sessions are "big-session" and "s-N"; 1% of entries are ingested
// bash-guard records flagged fail_open.
func loadScale(b *testing.B, pool *pgxpool.Pool) time.Time {
	b.Helper()
	ctx := context.Background()
	end := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	begin := end.AddDate(0, 0, -scaleDays)
	span := end.Sub(begin)
	type sess struct {
		id, agent string
		n         int
		at        time.Time
	}
	sessions := []sess{{"big-session", "agent-0", scaleBig, begin}}
	for i := range scaleSessions {
		sessions = append(sessions, sess{fmt.Sprintf("s-%05d", i), fmt.Sprintf("agent-%d", i%scaleAgents), 100,
			begin.Add(time.Duration(int64(span) / scaleSessions * int64(i)))})
	}
	copyRows(b, pool, "sessions", []string{"session_id", "agent_id", "writer", "created_at"}, len(sessions), func(i int) []any {
		return []any{sessions[i].id, sessions[i].agent, "external", sessions[i].at}
	})
	heads := make([][]byte, len(sessions))
	var newest time.Time
	var si, pos int
	var prev *acs.Hash
	var k int
	copyRows(b, pool, "entries", []string{"session_id", "position", "entry_hash", "previous_hash", "entry_id", "step_id", "step_type", "entry_timestamp", "recorded_at", "content"},
		scaleEntries, func(int) []any {
			s := sessions[si]
			at := s.at.Add(time.Duration(pos) * time.Second)
			if s.id == "big-session" {
				at = s.at.Add(time.Duration(int64(span) / scaleBig * int64(pos)))
			}
			if at.After(newest) {
				newest = at
			}
			content := scaleEntry(k, s.agent, at)
			h := acs.EntryHash(content, prev)
			var ph any
			if prev != nil {
				ph = prev[:]
			}
			row := []any{s.id, int64(pos), h[:], ph, fmt.Sprintf("e-%d", k), fmt.Sprintf("r-%d", k), "steps/toolCallRequest",
				at.Format(time.RFC3339Nano), at, content}
			k++
			pos++
			prev = &h
			if pos == s.n {
				heads[si] = h[:]
				si, pos, prev = si+1, 0, nil
			}
			return row
		})
	copyRows(b, pool, "heads", []string{"session_id", "length", "head", "updated_at"}, len(sessions), func(i int) []any {
		return []any{sessions[i].id, int64(sessions[i].n), heads[i], newest}
	})
	si, pos, k = 0, 0, 0
	copyRows(b, pool, "request_params", []string{"session_id", "position", "params", "recorded_at"}, scaleEntries, func(int) []any {
		s := sessions[si]
		params := fmt.Appendf(nil, `{"payload":{"arguments":{"command":{"value":"step %d"}},"tool":{"name":%q}}}`, k, scaleTools[k%len(scaleTools)])
		row := []any{s.id, int64(pos), params, s.at}
		k++
		pos++
		if pos == s.n {
			si, pos = si+1, 0
		}
		return row
	})
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return newest
}

// scaleEntry is entry k's canonical content (members in RFC 8785 order).
func scaleEntry(k int, agent string, at time.Time) []byte {
	disp, reason := "allow", "policy_default"
	switch r := k % 100; {
	case r < 10:
		disp, reason = "deny", scaleReasons[k%4]
	case r < 15:
		disp, reason = "modify", "secret_in_arguments"
	case r < 18:
		disp = "ask"
	case r < 20:
		disp = "defer"
	}
	reasoning := fmt.Sprintf("step %d: %s by rule %d", k, reason, k%7)
	if disp == "deny" && k%3 == 0 {
		reasoning += " (curl piped to a shell)"
	}
	version := fmt.Sprintf("1.0.%d", k%4)
	extra := ""
	if k%100 == 42 {
		extra = `,"flags":["fail_open"],"source_format":"bash-guard"`
	}
	// Members sorted: agent_id, decision, entry_id, [flags], request_hash,
	// [source_format], step_id, step_type, timestamp.
	flags, source := "", ""
	if extra != "" {
		flags, source = `,"flags":["fail_open"]`, `,"source_format":"bash-guard"`
	}
	return fmt.Appendf(nil, `{"agent_id":%q,"decision":{"disposition":%q,"policy_references":[{"policy_id":"baseline","policy_version":%q,"rule_id":"rule.%d"}],"reason_codes":[%q],"reasoning":%q},"entry_id":"e-%d"%s,"request_hash":"%064x"%s,"step_id":"r-%d","step_type":"steps/toolCallRequest","timestamp":%q}`,
		agent, disp, version, k%7, reason, reasoning, k, flags, k, source, k, at.Format(time.RFC3339Nano))
}

// copyRows copies n rows made by row into table.
func copyRows(b *testing.B, pool *pgxpool.Pool, table string, cols []string, n int, row func(i int) []any) {
	b.Helper()
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		r := row(i)
		i++
		return r, nil
	})
	got, err := pool.CopyFrom(context.Background(), pgx.Identifier{table}, cols, src)
	if err != nil || got != int64(n) {
		b.Fatalf("copy %s: %d of %d rows: %v", table, got, n, err)
	}
}
