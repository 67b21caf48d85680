package export

import (
	"fmt"
	"strconv"
	"strings"
)

// Cursor is where a reader resumes in the ledger's export order: at the
// Merkle leaf Leaf, after its first Skip events. The zero Cursor is the
// start of the log.
//
// On the wire (the pull API's "cursor" member and its after parameter) a
// line's cursor names the line itself: "L" for the last event of leaf L,
// "L.i" for event i (from 0) of leaf L when more events of that leaf
// follow (an OCSF step event before its Detection Finding). after=X
// resumes exactly after the line whose cursor is X. Leaf indexes are
// gap-free, global and replicated with the log, so a cursor means the same
// thing after a restart and on a promoted standby.
type Cursor struct {
	Leaf uint64
	Skip int
}

// lineCursor is the wire cursor of event i of leaf, of n events.
func lineCursor(leaf uint64, i, n int) string {
	if i == n-1 {
		return strconv.FormatUint(leaf, 10)
	}
	return strconv.FormatUint(leaf, 10) + "." + strconv.Itoa(i)
}

// ParseAfter returns where to resume after the line whose cursor is s; ""
// is the start of the log.
func ParseAfter(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	leafText, evText, hasEvent := strings.Cut(s, ".")
	leaf, err := strconv.ParseUint(leafText, 10, 63)
	if err != nil || strconv.FormatUint(leaf, 10) != leafText {
		return Cursor{}, fmt.Errorf("cursor %q: want a leaf index (digits), optionally followed by .N", s)
	}
	if !hasEvent {
		return Cursor{Leaf: leaf + 1}, nil
	}
	ev, err := strconv.Atoi(evText)
	if err != nil || ev < 0 || ev > 15 || strconv.Itoa(ev) != evText {
		return Cursor{}, fmt.Errorf("cursor %q: the event number after the dot must be 0-15", s)
	}
	return Cursor{Leaf: leaf, Skip: ev + 1}, nil
}

// String is the wire cursor of the line just before c: after=c.String()
// resumes at c. The start of the log has none ("").
func (c Cursor) String() string {
	if c.Skip > 0 {
		return strconv.FormatUint(c.Leaf, 10) + "." + strconv.Itoa(c.Skip-1)
	}
	if c.Leaf == 0 {
		return ""
	}
	return strconv.FormatUint(c.Leaf-1, 10)
}
