//go:build drills

package drills

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/internal/pgtest"
)

// bin is the acsledger binary the drills run, built once by TestMain.
var bin string

func TestMain(m *testing.M) { Main(m, &bin) }

// store is where a drill keeps its ledger.
type store struct {
	name string
	// open returns the --db value of a fresh, migrated store.
	open func(t *testing.T) string
}

// stores are the two stores the drills run on: the embedded SQLite store
// and PostgreSQL (migrated by `acsledger migrate`; serve never migrates).
var stores = []store{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "data") }},
	{"postgres", func(t *testing.T) string {
		db := pgtest.NewDatabase(t)
		Run(t, bin, "migrate", "--db", db)
		return db
	}},
}

// summary logs a drill's summary line.
func summary(t *testing.T, name, format string, args ...any) {
	t.Helper()
	t.Logf("drill %s: %s", name, fmt.Sprintf(format, args...))
}
