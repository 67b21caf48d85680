package sqlstore

import (
	"database/sql"
	"fmt"
	"regexp"
	"time"
)

// Dialect words what differs between the databases in the store's SQL and
// values. Every method is cheap: the search and the reads call them per
// query and per row.
type Dialect interface {
	// Param is the placeholder of the n-th argument (from 1).
	Param(n int) string
	// Rewrite turns query text written for PostgreSQL placeholders
	// ($n, $n::type) into the dialect's; the store calls it once per
	// query when its package initialises.
	Rewrite(query string) string

	// Time is t as a time column's argument.
	Time(t time.Time) any
	// ScanTime is a scan target that sets *t from a non-NULL time column.
	ScanTime(t *time.Time) any
	// ScanList is a scan target that sets *l from a list column (NULL
	// leaves it nil).
	ScanList(l *[]string) any

	// Contains is the condition "the list column col holds the value of
	// the placeholder p".
	Contains(col, p string) string
	// HasPrefix is the condition "col starts with the value of p".
	HasPrefix(col, p string) string
	// TextMatch is the condition "col holds the text TextArg made p's
	// value of", case-insensitively.
	TextMatch(col, p string) string
	TextArg(text string) any

	// IsUnique reports a unique-key violation: another writer stored the
	// same key first.
	IsUnique(err error) bool
	// StampsRows reports that the dialect's Merkle log tables take their
	// created_at from the statement (LogInsertCheckpoint and
	// LogAddCosignature then take the time as their last argument)
	// rather than from a column default.
	StampsRows() bool
}

// numbered matches a PostgreSQL placeholder with its optional cast.
var numbered = regexp.MustCompile(`\$([0-9]+)(::[a-z_]+(\[\])?)?`)

// NumberedParams rewrites PostgreSQL placeholders ($n, $n::type) to
// "?n", the numbered placeholders of SQLite, dropping their casts.
func NumberedParams(query string) string {
	return numbered.ReplaceAllString(query, "?$1")
}

// NullTime is a scan target for a nullable time column, in either
// database: PostgreSQL's timestamptz (a time.Time) or SQLite's Unix
// microseconds (an int64). NULL leaves the zero time.
type NullTime struct{ T *time.Time }

var _ sql.Scanner = NullTime{}

// Scan implements sql.Scanner.
func (n NullTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.T = time.Time{}
	case time.Time:
		*n.T = v.UTC()
	case int64:
		*n.T = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("a time column holds a %T", src)
	}
	return nil
}

// optTime is t as an argument, or NULL for the zero time.
func (s *Store) optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return s.dl.Time(t)
}
