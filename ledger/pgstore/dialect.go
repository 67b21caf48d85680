package pgstore

import (
	_ "embed"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

//go:embed dialect.sql
var dialectSQL string

// shared are the queries of ledger/internal/sqlstore, worded for
// PostgreSQL.
var shared = sqlstore.LoadQueries(dialect{}, dialectSQL)

// dialect is PostgreSQL's sqlstore.Dialect: pgx takes and gives times as
// time.Time (timestamptz) and lists as []string (text[]).
type dialect struct{}

func (dialect) Param(n int) string          { return "$" + strconv.Itoa(n) }
func (dialect) Rewrite(query string) string { return query }
func (dialect) Time(t time.Time) any        { return t }
func (dialect) ScanTime(t *time.Time) any   { return t }
func (dialect) ScanList(l *[]string) any    { return l }
func (dialect) IsUnique(err error) bool     { return uniqueViolation(err) }
func (dialect) StampsRows() bool            { return false }

// Contains: "<> '{}'" matches the partial GIN indexes (migration 0013): an
// array holding the value is not empty.
func (dialect) Contains(col, p string) string {
	return col + " @> ARRAY[" + p + "::text] AND " + col + " <> '{}'"
}

func (dialect) HasPrefix(col, p string) string { return "starts_with(" + col + ", " + p + ")" }

// TextMatch is ILIKE, so that the trigram index (migration 0010) serves
// it; "<> ”" matches the partial index (migration 0013): a text holding
// the value is not empty.
func (dialect) TextMatch(col, p string) string { return col + " ILIKE " + p + " AND " + col + " <> ''" }

func (dialect) TextArg(text string) any { return "%" + likeEscaper.Replace(text) + "%" }

// likeEscaper makes text match itself in a LIKE pattern (backslash is
// PostgreSQL's default escape character).
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)
