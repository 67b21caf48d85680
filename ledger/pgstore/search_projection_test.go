package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
)

// projectedEntry is a ContextEntry whose decision is an object with every
// member the search projects, varied by n; odd n have a string decision
// and a source_format instead.
func projectedEntry(n int) []byte {
	if n%2 == 1 {
		return fmt.Appendf(nil, `{"entry_id":"pe-%d","step_id":"ps-%d","step_type":"steps/toolCallRequest","timestamp":"2026-12-01T13:00:00Z",`+
			`"decision":"deny","source_format":"otel-genai","flags":["late","f-%d",3]}`, n, n, n)
	}
	return fmt.Appendf(nil, `{"entry_id":"pe-%d","step_id":"ps-%d","step_type":"steps/toolCallRequest","timestamp":"2026-12-01T13:00:00Z",`+
		`"decision":{"decision":"modify","reason_codes":["secret_in_args","r-%d",null],"reasoning":"redacted a token %d",`+
		`"policy_references":[{"policy_id":"zeta","policy_version":"2"},{"policy_id":"acsledger-baseline","policy_version":"1.1.0"},`+
		`{"policy_id":"p-%d"},{"policy_id":"zeta","policy_version":"2"},{"policy_version":"x"}]}}`, n, n, n, n, n)
}

// oddDecisions are decisions of every shape the projection reads, and
// oddTops the top-level members beside them.
var oddDecisions = []string{
	`"allow"`, `null`, `[1,"deny"]`, `7`, `true`, `{}`,
	`{"disposition":null,"decision":"ask"}`, `{"disposition":"defer","decision":"allow"}`, `{"decision":null}`,
	`{"decision":"deny","reason_codes":"not-a-list","policy_references":{"policy_id":"x"},"reasoning":12}`,
	`{"decision":"modify","reason_codes":["é","a\"b","a\\b",1,["x"],"z","z"],"reasoning":"line\nbreak \u00e9 \ud83d\ude00"}`,
	`{"decision":"deny","policy_references":[{"policy_id":"b","policy_version":null},"a",{"policy_id":1},{"policy_id":"É"},{"policy_id":"a","policy_version":"1"},{"policy_id":"a","policy_version":"1"},{"policy_id":"a-b"},{"policy_id":"A"}]}`,
}

var oddTops = []string{
	``, `,"source_format":"opa"`, `,"source_format":1,"source":"bash-guard"`, `,"source":{"x":1}`,
	`,"flags":"fail_open"`, `,"flags":["fail_open",null,"unlock_bypass"]`, `,"source_format":null,"flags":[]`,
}

// TestSearchProjection: whichever way entries are written (the Guardian's
// group commit in one statement with their params, a batch through COPY,
// plain appends), every entry has one search row, equal to what 0010's
// acsledger_search_project gives for its content, with the tool name of
// its params or none.
func TestSearchProjection(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	sign := func(a ledger.Appended) ([]byte, error) {
		return fmt.Appendf(nil, `{"chain_hash":%q}`, a.EntryHash), nil
	}
	// Guardian steps from several sessions at once share group commits.
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			var err error
			for i := range 6 {
				n := w*100 + i
				params := fmt.Appendf(nil, `{"payload":{"tool":{"name":"tool-%d"}}}`, n)
				if i == 5 {
					params = []byte(`{"payload":{}}`) // no tool name
				}
				_, _, err = s.AppendRequest(ctx, ledger.Record{SessionID: fmt.Sprintf("g-%d", w), AgentID: "a", Entry: projectedEntry(n)},
					params, ledger.Seen{RequestID: fmt.Sprintf("r-%d", n)}, sign)
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// A batch large enough for COPY, and a plain append.
	var batch []ledger.Record
	for i := range 70 {
		batch = append(batch, ledger.Record{SessionID: "batch", AgentID: "b", Entry: projectedEntry(1000 + i)})
	}
	if _, err := s.AppendBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// Batches whose contents the store reads itself (migration 0022): every
	// shape of decision the trigger reads one way or another, and one
	// batch with a member the store leaves to the trigger.
	for b, odd := range []string{"", `{"disposition":5}`} {
		batch = batch[:0]
		for i := range 70 {
			decision := oddDecisions[i%len(oddDecisions)]
			if i == 69 && odd != "" {
				decision = odd
			}
			entry := fmt.Appendf(nil, `{"entry_id":"oe-%d-%d","step_id":"os-%d-%d","step_type":"steps/toolCallResult","timestamp":"2026-12-01T13:00:00Z","decision":%s%s}`,
				b, i, b, i, decision, oddTops[i%len(oddTops)])
			batch = append(batch, ledger.Record{SessionID: fmt.Sprintf("odd-%d-%d", b, i%3), AgentID: "o", Entry: entry})
		}
		if _, err := s.AppendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, ledger.Record{SessionID: "plain", AgentID: "c", Entry: projectedEntry(2000)}); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var entries, rows, mismatched, tools int
	err = conn.QueryRow(ctx, `
SELECT (SELECT count(*) FROM entries), count(*),
    count(*) FILTER (WHERE (se.disposition, se.reason_codes, se.policy_refs, se.source, se.flags, se.reasoning, se.tool_name)
        IS DISTINCT FROM (p.disposition, p.reason_codes, p.policy_refs, p.source, p.flags, p.reasoning, coalesce(rp.tool_name, ''))),
    count(*) FILTER (WHERE se.tool_name <> '')
FROM entries e
JOIN search_entries se ON se.session_id = e.session_id AND se.position = e.position
LEFT JOIN request_params rp ON rp.session_id = e.session_id AND rp.position = e.position
CROSS JOIN LATERAL acsledger_search_project(convert_from(e.content, 'UTF8')::jsonb) p`).Scan(&entries, &rows, &mismatched, &tools)
	if err != nil {
		t.Fatal(err)
	}
	if want := 8*6 + 70 + 2*70 + 1; entries != want || rows != want || mismatched != 0 || tools != 8*5 {
		t.Fatalf("%d entries, %d with a search row, %d of them not the projection of their content; %d with a tool name (want %d, %d, 0; %d)",
			entries, rows, mismatched, tools, want, want, 8*5)
	}
	// A sample, spelled out: what the projection holds for an object
	// decision and for a string one.
	var disp, reasoning, tool, source string
	var codes, refs, flags []string
	if err := conn.QueryRow(ctx, `SELECT disposition, reason_codes, policy_refs, reasoning, tool_name, source, flags
FROM search_entries WHERE session_id = 'g-1' AND position = 2`).Scan(&disp, &codes, &refs, &reasoning, &tool, &source, &flags); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s %v %v %s %s %s %v", disp, codes, refs, reasoning, tool, source, flags); got != "modify [secret_in_args r-102] [acsledger-baseline acsledger-baseline@1.1.0 p-102 p-102@ zeta zeta@2] redacted a token 102 tool-102 guardian []" {
		t.Errorf("search row of g-1 position 2: %s", got)
	}
	if err := conn.QueryRow(ctx, `SELECT disposition, source, flags, tool_name FROM search_entries WHERE session_id = 'g-1' AND position = 1`).Scan(&disp, &source, &flags, &tool); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s %s %v %s", disp, source, flags, tool); got != "deny otel-genai [late f-101] tool-101" {
		t.Errorf("search row of g-1 position 1: %s", got)
	}
}
