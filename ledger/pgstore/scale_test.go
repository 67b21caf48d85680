package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// BenchmarkTenMillion loads entries into a throwaway PostgreSQL in stages
// (1M, 2M, 5M, 10M) and measures at each stage what a large fleet's ledger
// does all day: a Guardian append (AppendRequest, with params, replay key
// and signed response), a session's page of entries, the UI's searches,
// and an entry's Merkle inclusion proof. Flat means the 10M figures are
// those of 1M: docs/benchmarks.md records a run and the ratios.
//
//	make bench-10m
//
// It loads for an hour or more, so `make bench` leaves it out: it runs only
// with ACSLEDGER_BENCH_10M=1. ACSLEDGER_BENCH_ENTRIES lowers the target;
// ACSLEDGER_BENCH_BUDGET (a duration) stops loading when it is spent, and
// the last stage is measured where the load stopped.
//
// The fast path writes valid rows with COPY: sessions of 100 entries
// chained with real entry hashes, their heads, and the search projection
// computed here (no trigger fires for the COPY; a sample is checked
// against the database's own projection function). The Merkle log's queue
// is filled with one INSERT per COPY and drained by the real integrator,
// so every entry has a leaf and a proof. Request params and
// responses are written only by the measured appends.
func BenchmarkTenMillion(b *testing.B) {
	if os.Getenv("ACSLEDGER_BENCH_10M") == "" {
		b.Skip("loads 10,000,000 entries: run it with ACSLEDGER_BENCH_10M=1 (make bench-10m)")
	}
	target := 10_000_000
	if v := os.Getenv("ACSLEDGER_BENCH_ENTRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < scale10Chunk {
			b.Fatalf("ACSLEDGER_BENCH_ENTRIES=%q: want a number of entries, at least %d", v, scale10Chunk)
		}
		target = n
	}
	budget := 24 * time.Hour
	if v := os.Getenv("ACSLEDGER_BENCH_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ACSLEDGER_BENCH_BUDGET=%q: %v", v, err)
		}
		budget = d
	}
	ctx := context.Background()
	url := newDB(b)
	s := openStore(b, url, pgstore.Options{})
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer owner.Close(ctx)
	skey, _, err := tlog.KeyFromSeed("bench.example/log", tlog.Ed25519, [32]byte{16})
	if err != nil {
		b.Fatal(err)
	}
	lg, err := tlog.New(ctx, s.LogStorage(), tlog.Config{Origin: "bench.example/log", Keys: []string{skey}, BatchSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}

	l := &scaleLoad{b: b, s: s, owner: owner, log: lg, rng: rand.New(rand.NewPCG(16, 3)),
		copyTime: make(map[string]time.Duration)}
	start := time.Now()
	var results []scaleResult
	for _, stage := range []int{1_000_000, 2_000_000, 5_000_000, 10_000_000, target} {
		stage = min(stage, target)
		if stage <= l.n {
			continue
		}
		stopped := false
		for l.n < stage {
			if time.Since(start) > budget {
				stopped = true
				break
			}
			l.chunk()
		}
		l.settle()
		r := l.measure()
		r.loaded = time.Since(start)
		results = append(results, r)
		fmt.Printf("stage %d entries (%d leaves), loaded in %s (COPY %v, log integration %s), load average %s\n",
			r.entries, r.leaves, r.loaded.Round(time.Second), l.copyTime, l.logTime.Round(time.Second), r.loadavg)
		if stopped {
			fmt.Printf("budget %s spent: stopped loading at %d of %d entries\n", budget, l.n, target)
			break
		}
	}
	l.checkProjection()

	// The table: one row per measure, one column per stage, then the
	// ratio of the last stage to the first.
	first, last := results[0], results[len(results)-1]
	fmt.Printf("\n| measure (median / p95, ms) |")
	for _, r := range results {
		fmt.Printf(" %s |", humanCount(r.entries))
	}
	fmt.Printf(" ratio %s / %s (median) |\n|---|", humanCount(last.entries), humanCount(first.entries))
	for range results {
		fmt.Printf("---|")
	}
	fmt.Printf("---|\n")
	for i, m := range first.measures {
		fmt.Printf("| %s |", m.name)
		for _, r := range results {
			fmt.Printf(" %.2f / %.2f |", r.measures[i].median, r.measures[i].p95)
		}
		fmt.Printf(" %.2f |\n", last.measures[i].median/m.median)
	}
	fmt.Printf("| load average (1, 5, 15 min) |")
	for _, r := range results {
		fmt.Printf(" %s |", r.loadavg)
	}
	fmt.Printf(" |\n")
}

const (
	scale10Chunk    = 100_000 // entries per COPY
	scale10PerSess  = 100
	scale10Agents   = 50
	scale10Days     = 365
	scale10Repeats  = 100 // appends, session reads and proofs per stage
	scale10Searches = 9   // each search per stage
)

var scale10Reasons = []string{"remote_code_execution", "secret_in_arguments", "exfiltration_risk", "destructive_command", "policy_default"}
var scale10Tools = []string{"bash", "read_file", "write_file", "http_get", "send_email", "sql_query", "git_push", "deploy"}

// scaleLoad is the benchmark's ledger as it grows.
type scaleLoad struct {
	b     *testing.B
	s     *pgstore.Store
	owner *pgx.Conn
	log   *tlog.Log
	rng   *rand.Rand
	n     int // entries loaded with COPY
	// copyTime and logTime are where the load's time went.
	copyTime map[string]time.Duration
	logTime  time.Duration
	added    int // entries appended by the measures
}

type scaleMeasure struct {
	name        string
	median, p95 float64 // ms
}

type scaleResult struct {
	entries, leaves int
	loaded          time.Duration
	loadavg         string
	measures        []scaleMeasure
}

var scale10Begin = time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)

// sessionAt is session j's id, agent and creation time: sessions are
// created every 5 minutes in id order (10M entries span 347 days).
func sessionAt(j int) (id, agent string, at time.Time) {
	return fmt.Sprintf("s-%07d", j), fmt.Sprintf("agent-%d", j%scale10Agents),
		scale10Begin.Add(time.Duration(j) * 5 * time.Minute)
}

// entryAt is entry k's canonical content (members in RFC 8785 order) and
// the members the search projection (migration 0010) reads out of it.
func entryAt(k int, agent string, at time.Time) (content []byte, disp, reason, version, source, reasoning string, flags []string) {
	disp, reason = "allow", "policy_default"
	switch r := k % 100; {
	case r < 10:
		disp, reason = "deny", scale10Reasons[k%4]
	case r < 15:
		disp, reason = "modify", "secret_in_arguments"
	case r < 18:
		disp = "ask"
	}
	reasoning = fmt.Sprintf("step %d: %s by rule %d", k, reason, k%7)
	version = fmt.Sprintf("1.0.%d", k%4)
	source = "guardian"
	var flagsJSON, sourceJSON string
	if k%100 == 42 {
		source, flags = "bash-guard", []string{"fail_open"}
		flagsJSON, sourceJSON = `,"flags":["fail_open"]`, `,"source_format":"bash-guard"`
	}
	content = fmt.Appendf(nil, `{"agent_id":%q,"decision":{"disposition":%q,"policy_references":[{"policy_id":"baseline","policy_version":%q,"rule_id":"rule.%d"}],"reason_codes":[%q],"reasoning":%q},"entry_id":"e-%d"%s,"request_hash":"%064x"%s,"step_id":"r-%d","step_type":"steps/toolCallRequest","timestamp":%q}`,
		agent, disp, version, k%7, reason, reasoning, k, flagsJSON, k, sourceJSON, k, at.Format(time.RFC3339Nano))
	return content, disp, reason, version, source, reasoning, flags
}

// chunk loads the next scale10Chunk entries: their sessions, entries,
// heads and search rows, each with one COPY.
func (l *scaleLoad) chunk() {
	b, ctx := l.b, context.Background()
	first := l.n / scale10PerSess
	nSess := scale10Chunk / scale10PerSess
	type row = []any
	var sessions, entries, heads, search []row
	for j := first; j < first+nSess; j++ {
		id, agent, at := sessionAt(j)
		sessions = append(sessions, row{id, agent, "guardian", at})
		var prev *acs.Hash
		for p := range scale10PerSess {
			k := j*scale10PerSess + p
			rec := at.Add(time.Duration(p) * 200 * time.Millisecond)
			content, disp, reason, version, source, reasoning, flags := entryAt(k, agent, rec)
			h := acs.EntryHash(content, prev)
			var ph any
			if prev != nil {
				ph = prev[:]
			}
			entries = append(entries, row{id, int64(p), h[:], ph, fmt.Sprintf("e-%d", k), fmt.Sprintf("r-%d", k),
				"steps/toolCallRequest", rec.Format(time.RFC3339Nano), rec, content})
			if flags == nil {
				flags = []string{}
			}
			search = append(search, row{id, int64(p), agent, rec, fmt.Sprintf("r-%d", k), "steps/toolCallRequest",
				disp, []string{reason}, []string{"baseline", "baseline@" + version}, scale10Tools[k%len(scale10Tools)],
				source, flags, reasoning})
			prev = &h
		}
		heads = append(heads, row{id, int64(scale10PerSess), prev[:], at})
	}
	// Bulk rows skip the per-row work of the append path: the owner's
	// session runs as a replica (session_replication_role), which fires no
	// trigger, so neither the foreign key checks (the rows are valid by
	// construction) nor the projection (written below from the same
	// members) nor the log's queue (filled below in one statement).
	if _, err := l.owner.Exec(ctx, "SET session_replication_role = replica"); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, len(sessions))
	for i, r := range sessions {
		ids[i] = r[0].(string)
	}
	for _, c := range []struct {
		table string
		cols  []string
		rows  []row
	}{
		{"sessions", []string{"session_id", "agent_id", "writer", "created_at"}, sessions},
		{"entries", []string{"session_id", "position", "entry_hash", "previous_hash", "entry_id", "step_id", "step_type", "entry_timestamp", "recorded_at", "content"}, entries},
		{"heads", []string{"session_id", "length", "head", "updated_at"}, heads},
		{"search_entries", []string{"session_id", "position", "agent_id", "recorded_at", "step_id", "step_type",
			"disposition", "reason_codes", "policy_refs", "tool_name", "source", "flags", "reasoning"}, search},
	} {
		t0 := time.Now()
		n, err := l.owner.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows))
		l.copyTime[c.table] += time.Since(t0)
		if err != nil || n != int64(len(c.rows)) {
			b.Fatalf("copy %s: %d of %d rows: %v", c.table, n, len(c.rows), err)
		}
	}
	t0 := time.Now()
	if _, err := l.owner.Exec(ctx, "INSERT INTO tlog_pending (entry_id, session_id, position, entry_hash) SELECT id, session_id, position, entry_hash FROM entries WHERE session_id = ANY($1)", ids); err != nil {
		b.Fatal(err)
	}
	l.copyTime["tlog_pending"] += time.Since(t0)
	l.n += scale10Chunk
}

// settle gives every entry its leaf and a signed checkpoint, and the
// planner fresh statistics, as a running ledger has them.
func (l *scaleLoad) settle() {
	ctx := context.Background()
	l.settleLog()
	if _, err := l.owner.Exec(ctx, "VACUUM ANALYZE entries, search_entries, sessions, heads, tlog_leaves, tlog_pending"); err != nil {
		l.b.Fatal(err)
	}
}

// measure times each operation at the current size.
func (l *scaleLoad) measure() scaleResult {
	b, ctx := l.b, context.Background()
	sessions := l.n / scale10PerSess
	var r scaleResult
	timed := func(name string, n int, op func(i int)) {
		times := make([]float64, n)
		for i := range n {
			t0 := time.Now()
			op(i)
			times[i] = float64(time.Since(t0).Microseconds()) / 1000
		}
		slices.Sort(times)
		r.measures = append(r.measures, scaleMeasure{name, times[n/2], times[n*95/100]})
	}

	timed("Guardian append (AppendRequest: entry, params, replay key, response)", scale10Repeats, func(int) {
		j := l.rng.IntN(sessions)
		id, agent, _ := sessionAt(j)
		l.added++
		step := fmt.Sprintf("bench-%d", l.added)
		entry := fmt.Appendf(nil, `{"agent_id":%q,"decision":{"disposition":"allow","reason_codes":["policy_default"]},"entry_id":"be-%d","step_id":%q,"step_type":"steps/toolCallRequest","timestamp":"2026-12-01T00:00:00Z"}`,
			agent, l.added, step)
		_, resp, err := l.s.AppendRequest(ctx, ledger.Record{SessionID: id, AgentID: agent, Entry: entry},
			[]byte(`{"payload":{"tool":{"name":"bash"}}}`), ledger.Seen{RequestID: step, At: time.Now()},
			func(a ledger.Appended) ([]byte, error) { return []byte(a.EntryHash.String()), nil })
		if err != nil || len(resp) != 64 {
			b.Fatalf("append to %s: %q, %v", id, resp, err)
		}
	})
	// The appended entries join the log before the proofs are asked for.
	l.settleLog()

	timed("session read (a session's first page of 100 entries)", scale10Repeats, func(int) {
		id, _, _ := sessionAt(l.rng.IntN(sessions))
		es, err := l.s.Entries(ctx, id, 0, 100)
		if err != nil || len(es) != 100 {
			b.Fatalf("entries of %s: %d, %v", id, len(es), err)
		}
	})

	end := scale10Begin.Add(time.Duration(sessions) * 5 * time.Minute)
	searches := []struct {
		name string
		f    ledger.SearchFilter
	}{
		{"search: denials of one agent", ledger.SearchFilter{Disposition: "deny", AgentID: "agent-17"}},
		{"search: a reason code in the last month", ledger.SearchFilter{ReasonCode: "exfiltration_risk", Since: end.AddDate(0, -1, 0)}},
		{"search: a tool's denials", ledger.SearchFilter{ToolName: "bash", Disposition: "deny"}},
		{"search: a policy version's denials", ledger.SearchFilter{PolicyID: "baseline", PolicyVersion: "1.0.2", Disposition: "deny"}},
		{"search: one day, newest first", ledger.SearchFilter{Since: end.AddDate(0, 0, -2), Until: end.AddDate(0, 0, -1)}},
		{"search: no filter, newest first", ledger.SearchFilter{}},
	}
	for _, q := range searches {
		timed(q.name, scale10Searches, func(int) {
			p, err := l.s.SearchEntries(ctx, q.f)
			if err != nil || len(p.Hits) == 0 {
				b.Fatalf("%s: %d hits, %v", q.name, len(p.Hits), err)
			}
		})
	}

	timed("inclusion proof of an entry (EntryProof)", scale10Repeats, func(int) {
		id, _, _ := sessionAt(l.rng.IntN(sessions))
		proof, _, err := l.log.EntryProof(ctx, id, int64(l.rng.IntN(scale10PerSess)))
		if err != nil || !strings.Contains(string(proof), "bench.example/log") {
			b.Fatalf("proof in %s: %v", id, err)
		}
	})

	var leaves int
	if err := l.owner.QueryRow(ctx, "SELECT count(*) FROM tlog_leaves").Scan(&leaves); err != nil {
		b.Fatal(err)
	}
	r.entries, r.leaves = l.n+l.added, leaves
	avg, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		r.loadavg = strings.Join(strings.Fields(string(avg))[:3], " ")
	}
	return r
}

// settleLog integrates whatever is pending.
func (l *scaleLoad) settleLog() {
	t0 := time.Now()
	defer func() { l.logTime += time.Since(t0) }()
	for {
		n, err := l.log.Integrate(context.Background())
		if err != nil {
			l.b.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// checkProjection holds the projection written by the fast path to the
// database's own: for one entry in 5,000 (by id), what
// acsledger_search_project reads out of the stored content must be what
// was copied.
func (l *scaleLoad) checkProjection() {
	var differ, checked int
	err := l.owner.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE (se.disposition, se.reason_codes, se.policy_refs, se.source, se.flags, se.reasoning)
		                        IS DISTINCT FROM (p.disposition, p.reason_codes, p.policy_refs, p.source, p.flags, p.reasoning)),
		       count(*)
		FROM (SELECT session_id, position, content FROM entries WHERE id % 5000 = 0) e
		JOIN search_entries se USING (session_id, position)
		CROSS JOIN LATERAL acsledger_search_project(convert_from(e.content, 'UTF8')::jsonb) p`).Scan(&differ, &checked)
	if err != nil || checked == 0 || differ != 0 {
		l.b.Fatalf("projection check: %d of %d sampled rows differ from the database's projection, %v", differ, checked, err)
	}
	fmt.Printf("projection check: %d sampled rows equal the database's own projection\n", checked)
}

func humanCount(n int) string {
	if n >= 1_000_000 {
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	}
	return strconv.Itoa(n)
}
