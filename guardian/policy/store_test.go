package policy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bundleStore is the part of the ledger these tests need.
type bundleStore interface {
	Recorder
	PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error)
}

func TestLedgerRoundTripSQLite(t *testing.T) {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	must(t, err)
	defer s.Close()
	ledgerRoundTrip(t, s)
}

func TestLedgerRoundTripPostgres(t *testing.T) {
	url := pgtest.NewDatabase(t)
	must(t, pgstore.Migrate(context.Background(), url))
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	must(t, err)
	defer s.Close()
	ledgerRoundTrip(t, s)
}

// ledgerRoundTrip records bundles in a real store, reads one back and
// replays a decision under it.
func ledgerRoundTrip(t *testing.T, store bundleStore) {
	ctx := context.Background()
	e, err := New(ctx, Baseline(), store, nil)
	must(t, err)
	in := toolCall(t, "bash", "chmod -R 777 /")
	orig, err := e.Decide(ctx, in)
	must(t, err)

	// Recording is idempotent: a second engine on the same bundle is fine.
	if _, err := New(ctx, Baseline(), store, nil); err != nil {
		t.Fatalf("second New on the recorded baseline: %v", err)
	}
	must(t, e.Load(ctx, tinyBundle("2", allowAll)))
	changed := Baseline()
	changed.Modules["decision.rego"] += "\n# edited without a version bump\n"
	if err := e.Load(ctx, changed); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Load of changed baseline content under %s: %v, want ErrConflict", BaselineVersion, err)
	}
	if e.Current().ID != "tiny" {
		t.Fatalf("engine runs %+v after a refused load", e.Current())
	}

	ref := orig.PolicyReferences[0]
	rec, err := store.PolicyBundle(ctx, ref.PolicyID, ref.PolicyVersion)
	must(t, err)
	b, err := BundleFromRecord(rec)
	must(t, err)
	again, err := Replay(ctx, b, in, orig.NDBuiltinCache)
	must(t, err)
	if diff := Diff(orig, again); diff != nil || again.Disposition != acs.Deny {
		t.Fatalf("replay from the ledger: %s, diff %q", again.Disposition, diff)
	}
	if _, err := store.PolicyBundle(ctx, BaselineID, "0.0.0"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("PolicyBundle of an unrecorded version: %v, want ErrNotFound", err)
	}
}
