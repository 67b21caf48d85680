package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestTokens runs the token suite; the statements that must fail run as
// the owner, who holds every privilege, so the triggers are what stop
// them.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	storetest.RunTokens(t, s, func(stmt string) error {
		_, err := owner.Exec(ctx, stmt)
		return err
	})
}
