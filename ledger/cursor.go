package ledger

import (
	"fmt"
	"strconv"
)

// Session cursors are the creation sequence number of the last session of
// the previous page, in decimal. Callers must treat them as opaque.

// FormatCursor returns the cursor that continues after sequence number seq.
// It is for Store implementations.
func FormatCursor(seq int64) string { return strconv.FormatInt(seq, 10) }

// ParseCursor decodes a cursor made by FormatCursor; "" is the start.
func ParseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil || n < 0 || FormatCursor(n) != c {
		return 0, fmt.Errorf("session cursor %q: not a cursor this ledger made", c)
	}
	return n, nil
}
