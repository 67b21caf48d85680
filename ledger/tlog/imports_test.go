package tlog

import (
	"os/exec"
	"strings"
	"testing"
)

// The Merkle log is pure: no package under ledger/tlog, the storage
// conformance suite included, depends on a database driver. The stores
// implement its storage (ledger/pgstore, ledger/sqlitestore).
func TestNoDatabaseDriver(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	const suite = "github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	var sawSuite bool
	for _, d := range deps {
		sawSuite = sawSuite || d == suite
		if strings.HasPrefix(d, "database/") || strings.Contains(d, "pgx") || strings.Contains(d, "sqlite") ||
			strings.HasSuffix(d, "/ledger/pgstore") || strings.HasSuffix(d, "/ledger/sqlitestore") {
			t.Errorf("ledger/tlog/... depends on %s", d)
		}
	}
	if !sawSuite {
		t.Fatalf("go list -deps ./... did not list %s: %v", suite, deps)
	}
}
