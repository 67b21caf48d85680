package pgtest

import (
	"fmt"
	"path/filepath"
)

// Tool returns the path of a PostgreSQL client program (pg_dump,
// pg_restore, pg_dumpall, psql) from the directory that holds the server
// binaries NewServer runs, so that a dump is read and restored by the
// version of the server that wrote it.
func Tool(name string) (string, error) {
	bin, err := binDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(bin, name)
	if !isExec(p) {
		return "", fmt.Errorf("no %s beside the server binaries in %s", name, bin)
	}
	return p, nil
}
