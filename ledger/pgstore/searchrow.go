package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// searchColumns are the columns of search_entries that copySearch writes.
var searchColumns = []string{"session_id", "position", "agent_id", "recorded_at", "step_id", "step_type",
	"disposition", "reason_codes", "policy_refs", "tool_name", "source", "flags", "reasoning"}

// searchRow is one entry's row of the compliance search's projection
// (migration 0010), the members a search filters on.
type searchRow struct {
	disposition string
	reasonCodes []string
	policyRefs  []string
	source      string
	flags       []string
	reasoning   string
	toolName    string
}

// projectSearch reads an entry's search row out of its canonical content,
// as the projection trigger (acsledger_search_entries, migration 0012)
// reads it out of the content cast to jsonb. The store writes the rows of
// a COPYed group itself (write, migration 0022), which spares the
// database a jsonb parse and a trigger's statement per group.
//
// ok is false where this reading could differ from the trigger's: a
// member read as text that holds a number, a boolean, an object or an
// array (PostgreSQL would render its JSON text), or content the cast to
// jsonb refuses (an escaped NUL). The group is then left to the trigger.
// policy_refs comes out in byte order, which is the trigger's order in a
// database with the C collation; in another the two orders may differ,
// which no search sees (it matches policy_refs by containment).
func projectSearch(content []byte) (row searchRow, ok bool) {
	if bytes.Contains(content, []byte(`\u0000`)) {
		return searchRow{}, false
	}
	ok = true
	row.reasonCodes, row.policyRefs = []string{}, []string{}
	top := members(content, "decision", "source_format", "source", "flags")
	switch d := top[0]; {
	case isString(d):
		row.disposition, ok = jsonText(d)
	case isObject(d):
		m := members(d, "disposition", "decision", "reason_codes", "policy_references", "reasoning")
		row.disposition, ok = firstText(m[0], m[1])
		if ok {
			row.reasonCodes = stringElems(m[2])
			row.policyRefs, ok = policyRefs(m[3])
		}
		if ok && isString(m[4]) {
			row.reasoning, ok = jsonText(m[4])
		}
	}
	row.source = "guardian"
	if isString(top[1]) {
		row.source, _ = jsonText(top[1])
	} else if isString(top[2]) {
		row.source, _ = jsonText(top[2])
	}
	row.flags = stringElems(top[3])
	return row, ok
}

// members returns the values of the named top-level members of obj, a
// canonical object, in one pass; nil for an absent one.
func members(obj []byte, names ...string) [][]byte {
	out := make([][]byte, len(names))
	left := len(names)
	acs.CanonicalMembers(obj, func(name, value []byte) bool {
		for i, n := range names {
			if out[i] == nil && string(name) == n {
				out[i] = value
				left--
			}
		}
		return left > 0
	})
	return out
}

// firstText is coalesce(v0 ->> '{}', v1 ->> '{}', ...) over member
// values: the first that is present and not null, which must be a string
// (ok is false otherwise); empty when there is none.
func firstText(values ...[]byte) (string, bool) {
	for _, v := range values {
		if v == nil || string(v) == "null" {
			continue
		}
		return jsonText(v)
	}
	return "", true
}

// stringElems is the string elements of v, in order, when v is an array, and
// none otherwise: ARRAY(SELECT x #>> '{}' ... WHERE jsonb_typeof(x) =
// 'string').
func stringElems(v []byte) []string {
	out := []string{}
	if len(v) == 0 || v[0] != '[' {
		return out
	}
	acs.CanonicalElements(v, func(e []byte) {
		if s, ok := jsonText(e); ok && isString(e) {
			out = append(out, s)
		}
	})
	return out
}

// policyRefs is, for each element of v with a string policy_id, that id
// and "id@version", distinct and sorted.
func policyRefs(v []byte) ([]string, bool) {
	out := []string{}
	if len(v) == 0 || v[0] != '[' {
		return out, true
	}
	ok := true
	acs.CanonicalElements(v, func(r []byte) {
		if !isObject(r) {
			return
		}
		id := acs.CanonicalMember(r, "policy_id")
		if !isString(id) {
			return
		}
		idText, idOK := jsonText(id)
		version, vOK := firstText(acs.CanonicalMember(r, "policy_version"))
		if !idOK || !vOK {
			ok = false
			return
		}
		out = append(out, idText, idText+"@"+version)
	})
	slices.Sort(out)
	return slices.Compact(out), ok
}

func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }
func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// jsonText decodes a JSON string; ok is false for anything else.
func jsonText(v []byte) (string, bool) {
	if !isString(v) {
		return "", false
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true // canonical: no escape, no quote inside
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// projectGroup returns the search rows of p's entries, indexed like
// p.Rows, or nil when one of them is left to the trigger (projectSearch).
// The tool names come from the params stored beside the entries: rqIDs,
// rqPos and rqTools as write collected them.
func projectGroup(p *plan.Plan, rqIDs []string, rqPos []int64, rqTools []*string) []searchRow {
	rows := make([]searchRow, len(p.Rows))
	for i, r := range p.Rows {
		var ok bool
		if rows[i], ok = projectSearch(r.Entry.Content); !ok {
			return nil
		}
	}
	if len(rqIDs) > 0 {
		type at struct {
			session  string
			position int64
		}
		index := make(map[at]int, len(p.Rows))
		for i, r := range p.Rows {
			index[at{r.SessionID, r.Position}] = i
		}
		for j, id := range rqIDs {
			if i, found := index[at{id, rqPos[j]}]; found && rqTools[j] != nil {
				rows[i].toolName = *rqTools[j]
			}
		}
	}
	return rows
}

// copySearch COPYs the search rows of p's entries, each with its
// session's agent.
func copySearch(ctx context.Context, tx pgx.Tx, p *plan.Plan, rows []searchRow, now time.Time) error {
	agents := make(map[string]string, len(p.Moves))
	for _, m := range p.Moves {
		agents[m.SessionID] = m.AgentID
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"search_entries"}, searchColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r, e, s := p.Rows[i], p.Rows[i].Entry, rows[i]
		return []any{r.SessionID, r.Position, agents[r.SessionID], now, e.StepID, e.StepType,
			s.disposition, s.reasonCodes, s.policyRefs, s.toolName, s.source, s.flags, s.reasoning}, nil
	}))
	if err != nil {
		return fmt.Errorf("couldn't write the search rows: %w", err)
	}
	return nil
}
