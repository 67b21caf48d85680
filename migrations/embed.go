// Package migrations holds the ledger's numbered SQL migrations, one
// directory per SQL dialect, embedded into the binary.
//
// A migration file is named NNNN_name.sql; its version is NNNN. Stores apply
// every file in version order, each in its own transaction, and record the
// applied versions in a schema_migrations table.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string // file name, e.g. "0001_ledger.sql"
	SQL     string
}

// Postgres returns the PostgreSQL migrations in version order.
func Postgres() ([]Migration, error) { return load(files, "postgres") }

// SQLite returns the SQLite migrations in version order.
func SQLite() ([]Migration, error) { return load(files, "sqlite") }

func load(fsys fs.FS, dir string) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't list %s migrations: %w", dir, err)
	}
	var ms []Migration
	seen := make(map[int]string)
	for _, e := range ents {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || len(num) != 4 || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s/%s: name must be NNNN_name.sql with NNNN >= 0001", dir, name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s/%s and %s/%s share version %d", dir, other, dir, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("couldn't read migration %s/%s: %w", dir, name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}
