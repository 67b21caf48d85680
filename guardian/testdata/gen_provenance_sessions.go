//go:build ignore

// gen_provenance_sessions writes provenance_sessions.json: recorded-style
// sessions whose steps carry many provenance objects (ACS §7) and flows
// between them, for TestLineageDecidesAsWholeLog. The sessions are made
// from a fixed seed, so the file is the same on every run:
//
//	go run gen_provenance_sessions.go > provenance_sessions.json
//
// The steps mix what the baseline's flow rules look at: arguments from
// trusted and untrusted origins, trust hints, agent_generated data derived
// from earlier objects (in long chains, from ids never seen, and from ids
// kept past the session's 4,096-object cap), ids reused with other content
// in a later call, tool results carrying dozens of objects, consequential
// and harmless tools, clients that can and cannot route an ASK, and an
// Intent with parser_provenance.
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

type step struct {
	Method  string         `json:"method"`
	Payload map[string]any `json:"payload"`
}

type session struct {
	Name            string `json:"name"`
	AgentID         string `json:"agent_id"`
	ApproverCapable bool   `json:"approver_capable"`
	Steps           []step `json:"steps"`
}

var (
	origins = []string{"user_input", "system", "tool_output", "retrieved", "a2a_inbound", "external"}
	tools   = []string{
		"bash", "write_file", "send_email", "http_request", "git_push", "sql_query", "transfer_funds",
		"read_file", "grep", "web_search", "fetch_url", "calculator", "summarize_notes",
	}
	argNames = []string{"command", "path", "to", "body", "url", "query", "amount", "content"}
	values   = []string{"go test ./...", "ls -la", "README.md", "ops@example.com", "https://example.com/report", "select 1", "42", "status update"}
)

// gen grows one session.
type gen struct {
	r     *rand.Rand
	name  string
	n     int
	ids   []string // every id used so far, in order
	objs  map[string]map[string]any
	steps []step
}

func (g *gen) newID() string {
	g.n++
	id := fmt.Sprintf("p-%s-%d", g.name, g.n)
	g.ids = append(g.ids, id)
	return id
}

// earlier picks an id used before, mostly a recent one.
func (g *gen) earlier() string {
	if len(g.ids) == 0 || g.r.IntN(20) == 0 {
		return fmt.Sprintf("p-%s-never-%d", g.name, g.r.IntN(1000))
	}
	if g.r.IntN(3) == 0 {
		return g.ids[g.r.IntN(len(g.ids))]
	}
	lo := max(0, len(g.ids)-30)
	return g.ids[lo+g.r.IntN(len(g.ids)-lo)]
}

// object makes a new provenance object: from an origin, or agent_generated
// from earlier ones.
func (g *gen) object() map[string]any {
	id := g.newID()
	var o map[string]any
	if g.r.IntN(5) < 2 {
		var from []any
		for range 1 + g.r.IntN(3) {
			from = append(from, g.earlier())
		}
		o = map[string]any{"provenance_id": id, "origin": "agent_generated", "derived_from": from}
	} else {
		o = map[string]any{"provenance_id": id, "origin": origins[g.r.IntN(len(origins))]}
		if g.r.IntN(2) == 0 {
			o["source_id"] = []string{"read_file", "wiki", "crm", "inbox"}[g.r.IntN(4)]
		}
	}
	switch g.r.IntN(12) {
	case 0:
		o["trust"] = "untrusted"
	case 1:
		o["trust"] = "trusted"
	}
	g.objs[id] = o
	return o
}

// reused is an object seen before, sometimes with other content under the
// same id (the call's own object is the one the policy must use).
func (g *gen) reused() map[string]any {
	id := g.ids[g.r.IntN(len(g.ids))]
	o, ok := g.objs[id]
	if !ok || g.r.IntN(3) == 0 {
		return map[string]any{"provenance_id": id, "origin": origins[g.r.IntN(len(origins))]}
	}
	return o
}

func (g *gen) toolCall() {
	tool := tools[g.r.IntN(len(tools))]
	args := map[string]any{}
	for range 1 + g.r.IntN(3) {
		name := argNames[g.r.IntN(len(argNames))]
		arg := map[string]any{"value": values[g.r.IntN(len(values))]}
		switch k := g.r.IntN(10); {
		case k < 6:
			arg["provenance"] = g.object()
		case k < 8 && len(g.ids) > 0:
			arg["provenance"] = g.reused()
		case k < 9:
			// A chain: agent_generated from the last object made.
			from := []any{}
			if len(g.ids) > 0 {
				from = append(from, g.ids[len(g.ids)-1])
			}
			arg["provenance"] = map[string]any{"provenance_id": g.newID(), "origin": "agent_generated", "derived_from": from}
		}
		args[name] = arg
	}
	g.steps = append(g.steps, step{"steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": tool}, "arguments": args}})
}

// toolResult is a result carrying items objects.
func (g *gen) toolResult(items int) {
	var out []any
	for range items {
		out = append(out, map[string]any{"text": values[g.r.IntN(len(values))], "provenance": g.object()})
	}
	g.steps = append(g.steps, step{"steps/toolCallResult", map[string]any{
		"tool": map[string]any{"name": "web_search"}, "result": map[string]any{"items": out},
	}})
}

func (g *gen) userMessage() {
	o := map[string]any{"provenance_id": g.newID(), "origin": "user_input"}
	g.steps = append(g.steps, step{"steps/userMessage", map[string]any{
		"message": map[string]any{"role": "user", "content": "please go on", "provenance": o},
	}})
}

func (g *gen) intent() {
	g.steps = append(g.steps, step{"steps/agentTrigger", map[string]any{"intent": map[string]any{
		"raw": "fix the build", "parsed": []string{"filesystem.read", "process.execute"}, "scope_mode": "strict",
		"parser_provenance": map[string]any{"provenance_id": g.newID(), "origin": "user_input"},
	}}})
}

// newSession makes a session of steps steps: first fill results of
// exactly fillItems objects each, every fifth a tool call after
// them, then a mix of tool calls, results of up to resultItems objects and
// user messages.
func newSession(r *rand.Rand, name, agent string, capable, intent bool, steps, fill, fillItems, resultItems int) session {
	g := &gen{r: r, name: name, objs: map[string]map[string]any{}}
	if intent {
		g.intent()
	}
	for f := 0; f < fill; f++ {
		g.toolResult(fillItems)
		if f%5 == 4 {
			g.toolCall()
		}
	}
	for len(g.steps) < steps {
		switch k := r.IntN(10); {
		case k < 5:
			g.toolCall()
		case k < 8:
			g.toolResult(1 + r.IntN(resultItems))
		default:
			g.userMessage()
		}
	}
	return session{Name: name, AgentID: agent, ApproverCapable: capable, Steps: g.steps}
}

func main() {
	r := rand.New(rand.NewPCG(15, 3))
	sessions := []session{
		// Past the 4,096-object cap in 20 results of 210 objects, then a
		// few steps at the cap (deciding on the whole log is slow there,
		// so they are few).
		newSession(r, "long", "agent-7", true, true, 32, 20, 210, 6),
		newSession(r, "medium", "agent-7", true, false, 60, 6, 120, 6),
		newSession(r, "headless", "ci-headless", true, false, 80, 0, 0, 6),
		newSession(r, "incapable", "agent-9", false, true, 80, 0, 0, 6),
		newSession(r, "short", "agent-7", true, false, 40, 0, 0, 3),
	}
	fmt.Println("[")
	for i, s := range sessions {
		b, err := json.Marshal(s)
		if err != nil {
			panic(err)
		}
		sep := ","
		if i == len(sessions)-1 {
			sep = ""
		}
		fmt.Printf("%s%s\n", b, sep)
	}
	fmt.Println("]")
}
