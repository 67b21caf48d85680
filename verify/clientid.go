package verify

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/acsledger/acsledger/acs"
)

// CodeClientInEntry (a notice): ingested entries hold a member that
// identifies the source's client (an OPA decision's requested_by, a
// bash-guard decision's hostname), as ingest wrote them before such
// members were kept in the sealed source record only. They verify as they
// are; the member cannot be erased without breaking the chain.
const CodeClientInEntry = "client_in_entry"

// clientMembers are the members, by source_format, that ingest once
// copied from a record into its entry and that identify the client: the
// path of each, from the entry's top level.
var clientMembers = map[string][][]string{
	"opa":        {{"decision", "requested_by"}},
	"bash-guard": {{"hostname"}},
}

// clientNotes counts the entries holding a client member, the first at
// index first, and the members seen (client_in_entry).
type clientNotes struct {
	count, first int
	members      []string
}

// note counts entry i if it holds a client member.
func (c *clientNotes) note(i int, e *acs.Entry) {
	if !bytes.Contains(e.Content, []byte(`"source_format"`)) {
		return
	}
	format, ok := canonicalString(acs.CanonicalMember(e.Content, "source_format"))
	if !ok {
		return
	}
	held := false
	for _, path := range clientMembers[format] {
		v := e.Content
		for _, name := range path {
			if v = acs.CanonicalMember(v, name); v == nil {
				break
			}
		}
		if v == nil {
			continue
		}
		held = true
		if name := strings.Join(path, "."); !slices.Contains(c.members, name) {
			c.members = append(c.members, name)
		}
	}
	if !held {
		return
	}
	if c.count == 0 {
		c.first = i
	}
	c.count++
}

// finish returns the notice, if any entry was counted.
func (c *clientNotes) finish() []Finding {
	if c.count == 0 {
		return nil
	}
	return []Finding{{Code: CodeClientInEntry, EntryIndex: c.first, Where: "entries", Actual: fmt.Sprint(c.count),
		Message: fmt.Sprintf("%d entries, the first at index %d, hold a member identifying the source's client (%s), ingested before it was kept in the sealed source record only: they verify as they are, and that member cannot be erased without breaking the chain.",
			c.count, c.first, strings.Join(c.members, ", "))}}
}
