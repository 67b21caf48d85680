package pgstore_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPartmanRefusesLayout holds the reason docs/storage.md ("pg_partman:
// not for this layout") gives for keeping the ledger's own partitioning:
// pg_partman, as packaged, refuses to register the hash-partitioned
// parents of migration 0011, by their key (text) and by their kind (hash,
// not range). A pg_partman that accepted them would make this fail, and
// the choice would have to be made again.
func TestPartmanRefusesLayout(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pg_partman is required under CI=true (.ci/run installs postgresql-15-partman): %v", err)
		}
		t.Skipf("pg_partman not installed: %v", err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ parent, control, want string }{
		{"public.entries", "session_id", "only supports partitioning of data types that are integer or date/timestamp"},
		{"public.entries", "position", "as ranged"},
		{"public.responses", "session_id", "only supports partitioning of data types that are integer or date/timestamp"},
	} {
		// Each attempt is a statement of its own: a refusal rolls back
		// only itself.
		_, err := conn.Exec(ctx, "SELECT partman.create_parent($1, $2, 'native', '16')", tc.parent, tc.control)
		if err == nil {
			t.Errorf("pg_partman %s registered %s on %s: the ledger's partitions could be handed to it; revisit docs/storage.md", version, tc.parent, tc.control)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pg_partman %s on %s (%s): %v, want it to say %q", version, tc.parent, tc.control, err, tc.want)
		}
	}
}
