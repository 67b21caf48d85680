package sqlitestore

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

//go:embed dialect.sql
var dialectSQL string

// dialect is SQLite's sqlstore.Dialect: times are Unix microseconds
// (INTEGER), lists JSON arrays (TEXT), and the store's queries take
// numbered placeholders (?n).
type dialect struct{}

func (dialect) Param(n int) string          { return "?" + strconv.Itoa(n) }
func (dialect) Rewrite(query string) string { return sqlstore.NumberedParams(query) }
func (dialect) Time(t time.Time) any        { return t.UnixMicro() }
func (dialect) ScanTime(t *time.Time) any   { return sqlstore.NullTime{T: t} }
func (dialect) ScanList(l *[]string) any    { return jsonList{l} }
func (dialect) IsUnique(err error) bool     { return isUnique(err) }
func (dialect) StampsRows() bool            { return true }

func (dialect) Contains(col, p string) string {
	return "EXISTS (SELECT 1 FROM json_each(" + col + ") WHERE value = " + p + ")"
}

func (dialect) HasPrefix(col, p string) string {
	return "substr(" + col + ", 1, length(" + p + ")) = " + p
}

// TextMatch: lower() folds ASCII only in SQLite; the Postgres store folds
// all of Unicode.
func (dialect) TextMatch(col, p string) string {
	return "instr(lower(" + col + "), lower(" + p + ")) > 0"
}

func (dialect) TextArg(text string) any { return text }

// jsonList scans a JSON array of strings (migration 0010's projected
// lists); NULL leaves the list nil.
type jsonList struct{ l *[]string }

func (j jsonList) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		return json.Unmarshal([]byte(v), j.l)
	case []byte:
		return json.Unmarshal(v, j.l)
	}
	return fmt.Errorf("a list column holds a %T", src)
}
