package policy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
)

// bundleStore is the part of ledger.GuardianStore this test needs.
type bundleStore interface {
	Recorder
	PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error)
}

// TestLedgerRoundTrip records bundles in the real embedded store, reads
// one back and replays a decision under it. It runs once sqlitestore
// implements the GuardianStore policy bundle methods (landing in parallel
// with this package).
func TestLedgerRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	must(t, err)
	defer s.Close()
	store, ok := any(s).(bundleStore)
	if !ok {
		t.Skip("sqlitestore.Store does not implement PutPolicyBundle and PolicyBundle yet")
	}

	e, err := New(ctx, Baseline(), store, nil)
	must(t, err)
	in := toolCall(t, "bash", "chmod -R 777 /")
	orig, err := e.Decide(ctx, in)
	must(t, err)

	must(t, e.Load(ctx, tinyBundle("2", allowAll)))
	changed := Baseline()
	changed.Modules["decision.rego"] += "\n# edited without a version bump\n"
	if err := e.Load(ctx, changed); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Load of changed baseline content under %s: %v, want ErrConflict", BaselineVersion, err)
	}

	rec, err := store.PolicyBundle(ctx, orig.PolicyReferences[0].PolicyID, orig.PolicyReferences[0].PolicyVersion)
	must(t, err)
	b, err := BundleFromRecord(rec)
	must(t, err)
	again, err := Replay(ctx, b, in, orig.NDBuiltinCache)
	must(t, err)
	if diff := Diff(orig, again); diff != nil || again.Disposition != Deny {
		t.Fatalf("replay from the ledger: %s, diff %q", again.Disposition, diff)
	}
}
