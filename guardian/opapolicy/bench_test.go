package opapolicy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
)

// longSession is a session's provenance after 256 steps of 16 objects
// each (4,096, the Guardian's cap), as the Guardian keeps it and as it
// used to hand it over whole: tool output, retrieved documents, user input
// and agent_generated data derived from the objects before it.
func longSession(b *testing.B) (*guardian.ProvenanceLog, []json.RawMessage) {
	log := &guardian.ProvenanceLog{}
	var whole wholeLog
	origins := []string{"tool_output", "retrieved", "user_input", "agent_generated"}
	for s := range 256 {
		var items []any
		for k := range 16 {
			n := s*16 + k
			p := map[string]any{"provenance_id": fmt.Sprintf("p-%d", n), "origin": origins[n%4]}
			if n%4 == 3 {
				p["derived_from"] = []string{fmt.Sprintf("p-%d", n-1), fmt.Sprintf("p-%d", n-2)}
			}
			items = append(items, map[string]any{"text": "result", "provenance": p})
		}
		payload, err := json.Marshal(map[string]any{"tool": map[string]any{"name": "web_search"}, "result": map[string]any{"items": items}})
		if err != nil {
			b.Fatal(err)
		}
		log.Add(payload)
		whole.add(b, payload)
	}
	if log.Len() != 4096 {
		b.Fatalf("the session keeps %d objects, want 4,096", log.Len())
	}
	return log, whole.objs
}

// benchCall is a tool call step: bash with a command the user typed (the
// common case), or send_email with a recipient the agent derived from two
// objects of the session's steps 100 and 200 (a flow the baseline ASKs
// about, citing them).
func benchCall(b *testing.B, flow bool) (guardian.Input, any) {
	args := map[string]any{"command": map[string]any{"value": "go test ./...", "provenance": map[string]any{"provenance_id": "p-cmd", "origin": "user_input"}}}
	tool := "bash"
	if flow {
		tool = "send_email"
		args = map[string]any{
			"to":   map[string]any{"value": "ops@example.com", "provenance": map[string]any{"provenance_id": "p-to", "origin": "agent_generated", "derived_from": []string{"p-1601", "p-3201"}}},
			"body": map[string]any{"value": "status", "provenance": map[string]any{"provenance_id": "p-body", "origin": "user_input"}},
		}
	}
	s := &recordedSession{Name: "bench", AgentID: "agent-7", ApproverCapable: true}
	payload, err := json.Marshal(map[string]any{"tool": map[string]any{"name": tool}, "arguments": args})
	if err != nil {
		b.Fatal(err)
	}
	s.Steps = append(s.Steps, struct {
		Method  string          `json:"method"`
		Payload json.RawMessage `json:"payload"`
	}{"steps/toolCallRequest", payload})
	return stepInput(b, s, 0, nil)
}

// BenchmarkDecisionProvenance measures a decision of the shipped baseline
// (building the Guardian's provenance for the step, opapolicy.BuildInput,
// evaluation) in a fresh session and in one holding 4,096 provenance
// objects, in the same loop so that both see the same machine, and reports
// each and their ratio, in wall-clock and in the process's CPU time.
// old-4096 is the same step handed the whole log, as before the Guardian
// handed a step's lineage, with its ratio to fresh (timed after the
// others, on a twentieth of the iterations).
// The fresh session of the flow call holds only the two objects the call
// derives from, so that it decides the same (ASK, citing them).
func BenchmarkDecisionProvenance(b *testing.B) {
	ctx := context.Background()
	e := engines(b)["acsledger-baseline@"+policy.BaselineVersion]
	long, whole := longSession(b)
	for _, flow := range []bool{false, true} {
		name := "benign"
		if flow {
			name = "flow"
		}
		b.Run(name, func(b *testing.B) {
			in, doc := benchCall(b, flow)
			fresh := &guardian.ProvenanceLog{}
			if flow {
				payload, _ := json.Marshal(map[string]any{"items": []any{
					map[string]any{"provenance": map[string]any{"provenance_id": "p-1601", "origin": "retrieved"}},
					map[string]any{"provenance": map[string]any{"provenance_id": "p-3201", "origin": "retrieved"}},
				}})
				fresh.Add(payload)
			}
			decide := func(in guardian.Input) *policy.Decision {
				pin, err := opapolicy.BuildInput(in)
				if err != nil {
					b.Fatal(err)
				}
				d, err := e.Decide(ctx, pin)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			stepOn := func(log *guardian.ProvenanceLog) *policy.Decision {
				in := in
				in.Provenance = log.Lineage(doc, nil)
				return decide(in)
			}
			stepOnWhole := func() *policy.Decision {
				in := in
				in.Provenance = slices.Clone(whole)
				return decide(in)
			}
			want := guardian.Allow
			if flow {
				want = guardian.Ask
			}
			a, _ := json.Marshal(stepOn(long))
			o, _ := json.Marshal(stepOnWhole())
			if !bytes.Equal(a, o) || stepOn(fresh).Disposition != want || stepOn(long).Disposition != want {
				b.Fatalf("the decisions differ or are not %s:\n lineage %s\n whole   %s", want, a, o)
			}
			// fresh and 4,096 take turns, so that both see the same load
			// and each pays for the other's garbage; the old path, which
			// makes far more, runs after them, on a twentieth of the
			// iterations.
			var fresh1, long1, old1 cost
			odd := false
			for b.Loop() {
				// Each goes first on every other iteration.
				if odd {
					long1.add(func() { stepOn(long) })
					fresh1.add(func() { stepOn(fresh) })
				} else {
					fresh1.add(func() { stepOn(fresh) })
					long1.add(func() { stepOn(long) })
				}
				odd = !odd
			}
			for range max(1, b.N/20) {
				old1.add(func() { stepOnWhole() })
			}
			b.ReportMetric(fresh1.wallµs(), "fresh-µs")
			b.ReportMetric(long1.wallµs(), "4096-µs")
			b.ReportMetric(long1.wallµs()/fresh1.wallµs(), "ratio")
			b.ReportMetric(old1.wallµs(), "old-4096-µs")
			b.ReportMetric(old1.wallµs()/fresh1.wallµs(), "old-ratio")
			if fresh1.cpu > 0 {
				b.ReportMetric(fresh1.cpuµs(), "fresh-cpu-µs")
				b.ReportMetric(long1.cpuµs(), "4096-cpu-µs")
				b.ReportMetric(long1.cpuµs()/fresh1.cpuµs(), "cpu-ratio")
				b.ReportMetric(old1.cpuµs()/fresh1.cpuµs(), "old-cpu-ratio")
			}
		})
	}
}

// cost sums the wall-clock and process CPU time of timed calls.
type cost struct {
	n         int
	wall, cpu time.Duration
}

func (c *cost) add(f func()) {
	c0, t0 := processCPU(), time.Now()
	f()
	c.wall += time.Since(t0)
	c.cpu += processCPU() - c0
	c.n++
}

func (c *cost) wallµs() float64 { return float64(c.wall.Nanoseconds()) / 1e3 / float64(c.n) }
func (c *cost) cpuµs() float64  { return float64(c.cpu.Nanoseconds()) / 1e3 / float64(c.n) }
