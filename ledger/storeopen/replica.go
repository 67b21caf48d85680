package storeopen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
)

// ReadReplica is a streaming standby of a PostgreSQL store's server,
// opened for reads (acsledger serve --db-read). Its reads lag the
// primary's writes by what the standby has not replayed yet: Lag measures
// that, CatchUp waits it out.
type ReadReplica struct {
	// Store reads the standby. Nothing writes through it: a standby
	// refuses writes.
	Store
	replica, primary *pgstore.Store
}

// OpenReadReplica opens the standby at url as a read replica of primary,
// which must be a PostgreSQL store. The standby's schema is the primary's,
// so it must be at this code's version too; the credential is the writer
// login's, whose SET ROLE a standby allows. opts are the primary's: the
// replica opens the request params the primary sealed.
func OpenReadReplica(ctx context.Context, url string, primary Store, opts ledger.Options) (*ReadReplica, error) {
	p, ok := primary.(*pgstore.Store)
	if !ok {
		return nil, errors.New("a read replica serves a PostgreSQL store, and the store is not one")
	}
	t, err := Parse(url)
	if err != nil {
		return nil, err
	}
	if t.Postgres == "" {
		return nil, fmt.Errorf("read replica %s: a read replica is a PostgreSQL URL or key=value string", Redact(url))
	}
	r, err := pgstore.Open(ctx, t.Postgres, pgstore.Options{Options: opts, Committers: 1})
	if err != nil {
		return nil, redactedError(t.Postgres, err)
	}
	return &ReadReplica{Store: r, replica: r, primary: p}, nil
}

// Lag measures how far the replica is behind the primary. It returns
// pgstore.ErrNotStandby when the replica is not in recovery.
func (r *ReadReplica) Lag(ctx context.Context) (pgstore.Lag, error) {
	return r.replica.LagBehind(ctx, r.primary)
}

// CatchUp waits, at most timeout, until the replica has replayed every
// commit the primary had made when it was called.
func (r *ReadReplica) CatchUp(ctx context.Context, timeout time.Duration) error {
	return r.replica.CatchUp(ctx, r.primary, timeout)
}
