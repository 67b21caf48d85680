package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// TestSessionLeavesPlan: the reads of one session's leaves are bounded
// scans of the index of migration 0008, not scans of every leaf, so that
// holding a session against the log costs what the session holds.
func TestSessionLeavesPlan(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	storetest.AppendSessions(t, s, "s-%03d", 300, 3)
	l, err := tlog.New(ctx, s.LogStorage(), tlog.Config{Origin: "example.com/plan", Keys: []string{planLogKey(t)}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := l.Integrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	owner := ownerConn(t, url)
	if _, err := owner.Exec(ctx, "ANALYZE tlog_leaves"); err != nil {
		t.Fatal(err)
	}
	for name, plan := range map[string]string{
		"SessionLeaves":   explain(t, owner, pgstore.QuerySessionLeaves, "s-150", 0, int64(1<<62), 1000),
		"LastSessionLeaf": explain(t, owner, pgstore.QueryLastSessionLeaf, "s-150", int64(900)),
	} {
		if !strings.Contains(plan, "tlog_leaves_session") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
			t.Errorf("%s is not an ordered scan of tlog_leaves_session:\n%s", name, plan)
		}
	}
}

func planLogKey(t *testing.T) string {
	t.Helper()
	skey, _, err := tlog.KeyFromSeed("example.com/plan", tlog.Ed25519, [32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	return skey
}
