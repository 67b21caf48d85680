package whatif_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/guardian/whatif"
	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var kinds = []string{"sqlite", "postgres"}

// denyReadFile is the baseline with one more rule: read_file is denied.
const denyReadFile = `package acs.tools

import data.acs.call

findings contains {
	"disposition": "deny",
	"rule_id": "candidate.no_read_file",
	"reason_codes": ["candidate_denied"],
	"reasoning": "read_file is no longer allowed",
} if {
	call.is_tool_call
	call.name == "read_file"
}
`

// candidate is the baseline as version label, with extra modules.
func candidate(t testing.TB, label string, extra map[string]string) *whatif.Candidate {
	t.Helper()
	b := policy.Baseline()
	b = &policy.Bundle{ID: b.ID, Version: label, Modules: maps.Clone(b.Modules), Data: b.Data}
	maps.Copy(b.Modules, extra)
	c, err := whatif.NewCandidate(context.Background(), b, true)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs c over the fixture's steps and returns the changes and the
// summary.
func run(t testing.TB, st whatif.Store, c *whatif.Candidate, opts whatif.Options) ([]whatif.Change, *whatif.Summary) {
	t.Helper()
	var changes []whatif.Change
	sum, err := whatif.Run(context.Background(), st, c, opts, func(ch whatif.Change) error {
		changes = append(changes, ch)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return changes, sum
}

func readFile(name string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": "read_file"},
		"arguments": map[string]any{"path": map[string]any{"value": name, "provenance": map[string]any{"provenance_id": "p-" + name, "origin": "user_input"}}}}
}

// TestDenyTool: a candidate that denies a tool the baseline allowed
// reports exactly the steps that used it, as allow->deny with the new
// rule, and nothing else; filters narrow the run to the named steps.
func TestDenyTool(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			extra := f.NewSession(t, f.HMACSession)
			f.Call(t, extra, "steps/toolCallRequest", readFile("a.txt"))
			f.Call(t, extra, "steps/userMessage", map[string]any{"content": []any{map[string]any{
				"type": "text", "value": "now b", "provenance": map[string]any{"provenance_id": "p-msg", "origin": "user_input"}}}})
			f.Call(t, extra, "steps/toolCallRequest", readFile("b.txt"))
			var want []string
			for _, s := range f.Steps {
				var p struct {
					Payload struct {
						Tool struct{ Name string } `json:"tool"`
					} `json:"payload"`
				}
				_ = json.Unmarshal(s.Params, &p)
				if p.Payload.Tool.Name == "read_file" {
					if s.Decision != "allow" {
						t.Fatalf("the baseline answered %s to read_file", s.Decision)
					}
					want = append(want, s.RequestID)
				}
			}
			c := candidate(t, "no-read-file", map[string]string{"candidate.rego": denyReadFile})
			changes, sum := run(t, f.Store, c, whatif.Options{})
			var got []string
			for _, ch := range changes {
				got = append(got, ch.StepID)
				if ch.Kind != "allow->deny" || ch.Tool != "read_file" || !slices.Equal(ch.Candidate.Rules, []string{"candidate.no_read_file"}) ||
					!slices.Equal(ch.Recorded.Rules, []string{"baseline.default_allow"}) || ch.Source != "guardian" || len(ch.Approximate) != 0 {
					t.Errorf("change %+v", ch)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("changed steps %v, want the read_file steps %v", got, want)
			}
			if sum.Evaluated != int64(len(f.Steps)) || sum.Changed != int64(len(want)) || sum.Unchanged != sum.Evaluated-sum.Changed ||
				sum.ByKind["allow->deny"] != int64(len(want)) || len(sum.ByKind) != 1 || sum.NotReplayable != 0 {
				t.Fatalf("summary %+v, %d steps", sum, len(f.Steps))
			}
			if len(sum.Rules) != 2 || sum.Rules[0].Rule != "baseline.default_allow" && sum.Rules[0].Rule != "candidate.no_read_file" ||
				sum.Rules[0].Gained+sum.Rules[0].Lost != int64(len(want)) {
				t.Errorf("rules %+v", sum.Rules)
			}
			today := time.Now().UTC().Format(time.DateOnly)
			if len(sum.ChangedByDay) != 1 || sum.ChangedByDay[0] != (whatif.DayCount{Day: today, Changed: int64(len(want))}) {
				t.Errorf("changed by day %+v", sum.ChangedByDay)
			}

			// Filters: one session, a tool, a recorded decision; the
			// earlier entries of a session the filter leaves out still
			// build the input.
			changes, sum = run(t, f.Store, c, whatif.Options{Filter: ledger.StepFilter{SessionID: extra, ToolName: "read_file"}})
			if len(changes) != 2 || sum.Read != 2 || changes[0].SessionID != extra || changes[0].Position != 0 || changes[1].Position != 2 {
				t.Fatalf("session+tool filter: %+v, %+v", changes, sum)
			}
			_, sum = run(t, f.Store, c, whatif.Options{Filter: ledger.StepFilter{Disposition: "deny"}})
			if sum.Changed != 0 || sum.Evaluated == 0 {
				t.Fatalf("deny filter: %+v", sum)
			}
			_, sum = run(t, f.Store, c, whatif.Options{Limit: 3})
			if sum.Read != 3 || !sum.Truncated {
				t.Fatalf("limit 3: %+v", sum)
			}
		})
	}
}

type hook struct {
	Method  string         `json:"method"`
	Payload map[string]any `json:"payload"`
}

// TestIdenticalCandidate: the recorded policy under another label changes
// nothing over a history of every steps/* hook, in several sessions, with
// every step evaluated exactly (no approximation) and no rule firing
// differently.
func TestIdenticalCandidate(t *testing.T) {
	raw, err := os.ReadFile("testdata/hooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var hooks []hook
	if err := json.Unmarshal(raw, &hooks); err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			for _, like := range []string{f.HMACSession, f.ECDSASession} {
				sid := f.NewSession(t, like)
				for _, h := range hooks {
					f.Call(t, sid, h.Method, h.Payload)
				}
			}
			changes, sum := run(t, f.Store, candidate(t, "same-again", nil), whatif.Options{})
			if len(changes) != 0 || sum.Changed != 0 || sum.RulesOnly != 0 || len(sum.Rules) != 0 {
				t.Fatalf("an identical candidate changed %+v: %+v", changes, sum)
			}
			if sum.Evaluated != int64(len(f.Steps)) || sum.NotReplayable != 0 || sum.Approximate != 0 {
				t.Fatalf("evaluated %d of %d steps: %+v", sum.Evaluated, len(f.Steps), sum)
			}
			methods := map[string]bool{}
			for _, s := range f.Steps {
				methods[s.Method] = true
			}
			if len(methods) < len(hooks) {
				t.Fatalf("the history holds %d methods, want every one of %d hooks", len(methods), len(hooks))
			}
		})
	}
}

// TestErasedStep: a step whose params were erased is not replayable, with
// the erasure's reason, never guessed; the session's later steps are
// evaluated, marked approximate (their provenance lacks the erased step).
func TestErasedStep(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			first := f.Steps[0]
			es, err := f.Store.EntriesByStep(ctx, first.RequestID, first.SessionID)
			if err != nil || len(es) != 1 {
				t.Fatal(es, err)
			}
			if _, err := f.Store.EraseParams(ctx, first.SessionID, es[0].Position, "gdpr request 42", "dpo"); err != nil {
				t.Fatal(err)
			}
			_, sum := run(t, f.Store, candidate(t, "same-again", nil), whatif.Options{})
			if sum.NotReplayable != 1 || sum.NotReplayableByKind["params_erased"] != 1 || len(sum.NotReplayableSteps) != 1 {
				t.Fatalf("summary %+v", sum)
			}
			skip := sum.NotReplayableSteps[0]
			if skip.StepID != first.RequestID || !strings.Contains(skip.Reason, "gdpr request 42") {
				t.Fatalf("not replayable %+v", skip)
			}
			if sum.Evaluated != int64(len(f.Steps)-1) || sum.Changed != 0 || sum.ApproximateByKind["provenance"] == 0 {
				t.Fatalf("summary %+v", sum)
			}
		})
	}
}

// TestOPADecisions: ingested OPA decisions are evaluated under a changed
// Rego at their recorded path on their recorded input; a masked input is
// not replayable.
func TestOPADecisions(t *testing.T) {
	raw, err := os.ReadFile("testdata/opa-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	b, err := whatif.LoadBundle("testdata/authz-candidate", "authz", "reads-only")
	if err != nil {
		t.Fatal(err)
	}
	c, err := whatif.NewCandidate(context.Background(), b, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Guardian {
		t.Fatal("the authz candidate has no Guardian decision rule")
	}
	if _, err := whatif.NewCandidate(context.Background(), b, true); !errors.Is(err, whatif.ErrBadCandidate) || !strings.Contains(err.Error(), policy.DecisionRule) {
		t.Fatalf("a run over Guardian steps without %s: %v", policy.DecisionRule, err)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			r := ingest.Runner{Store: f.Store}
			if sum, err := r.Run(context.Background(), ingest.OPAMapper{}, ingest.Lines(bytes.NewReader(raw), "opa.jsonl")); err != nil || sum.Accepted != 4 {
				t.Fatalf("ingest: %+v, %v", sum, err)
			}
			if _, err := whatif.Run(context.Background(), f.Store, c, whatif.Options{}, nil); !errors.Is(err, whatif.ErrBadRun) {
				t.Fatalf("an OPA-only candidate over every source: %v", err)
			}
			changes, sum := run(t, f.Store, c, whatif.Options{Filter: ledger.StepFilter{Source: "opa"}})
			if len(changes) != 1 || changes[0].StepID != "opa:w-2" || changes[0].Kind != "allow->deny" ||
				string(changes[0].Recorded.Result) != "true" || string(changes[0].Candidate.Result) != "false" {
				t.Fatalf("changes %+v", changes)
			}
			if sum.Read != 4 || sum.Evaluated != 3 || sum.Unchanged != 2 || sum.NotReplayable != 1 ||
				sum.NotReplayableByKind["input_masked"] != 1 || !strings.Contains(sum.NotReplayableSteps[0].Reason, "/input/token") {
				t.Fatalf("summary %+v", sum)
			}
			// The input lives in the source record kept beside the entry:
			// erased, the decision is not replayable, and says why.
			if _, err := f.Store.EraseSource(context.Background(), changes[0].SessionID, changes[0].Position, "data subject request", "dpo"); err != nil {
				t.Fatal(err)
			}
			changes, sum = run(t, f.Store, c, whatif.Options{Filter: ledger.StepFilter{Source: "opa"}})
			if len(changes) != 0 || sum.Evaluated != 2 || sum.NotReplayableByKind["input_erased"] != 1 {
				t.Fatalf("after erasing the changed step's source: changes %+v, summary %+v", changes, sum)
			}
			for _, nr := range sum.NotReplayableSteps {
				if nr.StepID == "opa:w-2" && !strings.Contains(nr.Reason, "data subject request") {
					t.Errorf("the erased step's reason %q does not name the erasure", nr.Reason)
				}
			}
		})
	}
}

// TestBadInput: a bundle that does not compile is refused with OPA's own
// message before anything runs; so are a limit over the cap and an
// inverted time range, naming the flag.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	b := &policy.Bundle{ID: "x", Version: "1", Modules: map[string]string{"x.rego": "package acs\n\ndecision := {\n"}}
	if _, err := whatif.NewCandidate(ctx, b, true); !errors.Is(err, whatif.ErrBadCandidate) || !strings.Contains(err.Error(), "x.rego:") {
		t.Fatalf("a bundle that does not parse: %v", err)
	}
	b.Modules["x.rego"] = "package acs\n\ndecision := {\"decision\": \"allow\", \"rule_ids\": [\"x\"]} if input.nope == undefined_var\n"
	if _, err := whatif.NewCandidate(ctx, b, true); !errors.Is(err, whatif.ErrBadCandidate) || !strings.Contains(err.Error(), "undefined_var") {
		t.Fatalf("a bundle that does not compile: %v", err)
	}
	// External data: http.send is refused, for OPA decisions too.
	b.Modules["x.rego"] = "package authz\n\nallow if http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"}).status_code == 200\n"
	if _, err := whatif.NewCandidate(ctx, b, false); !errors.Is(err, whatif.ErrBadCandidate) || !strings.Contains(err.Error(), "http.send") {
		t.Fatalf("a bundle calling http.send: %v", err)
	}
	f := evidencetest.New(t, "sqlite")
	c := candidate(t, "again", nil)
	for name, opts := range map[string]whatif.Options{
		"--limit": {Limit: 11, MaxSteps: 10},
		"until":   {Filter: ledger.StepFilter{Since: time.Now(), Until: time.Now().Add(-time.Hour)}},
	} {
		if _, err := whatif.Run(ctx, f.Store, c, opts, nil); !errors.Is(err, whatif.ErrBadRun) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := whatif.Run(ctx, f.Store, c, whatif.Options{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled run: %v", err)
	}
}
