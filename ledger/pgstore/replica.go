package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

// A Store opened on a streaming standby of the primary's server is a read
// replica (acsledger serve --db-read): its reads lag the primary by what
// the standby has not replayed yet. The methods here measure that lag and
// wait it out where a read must see everything the primary committed.

//go:embed replica.sql
var replicaSQL string

type replicaQueries struct {
	WALPosition, ReplayPosition string
}

var rq = sqlq.Load[replicaQueries](replicaSQL)

// LSN is a position in PostgreSQL's write-ahead log.
type LSN uint64

// ParseLSN reads the text form of a pg_lsn, two hexadecimal halves
// separated by a slash ("16/B374D848").
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed WAL position %q", s)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xffffffff) }

// WALPosition returns the end of the WAL the primary has written: a
// standby that has replayed up to it holds every commit made so far.
func (s *Store) WALPosition(ctx context.Context) (LSN, error) {
	var pos string
	if err := s.pool.QueryRow(ctx, rq.WALPosition).Scan(&pos); err != nil {
		return 0, fmt.Errorf("couldn't read the primary's WAL position: %w", err)
	}
	return ParseLSN(pos)
}

// Replay is how far a standby has replayed its primary's WAL.
type Replay struct {
	// Standby is false for a server that is not in recovery: then nothing
	// below is known.
	Standby bool
	LSN     LSN
	// LastCommit is the primary's commit time of the last transaction
	// replayed; zero before the first.
	LastCommit time.Time
	// Now is the standby's clock when it answered.
	Now time.Time
}

// ReplayPosition returns how far the server s is connected to has replayed
// its primary's WAL.
func (s *Store) ReplayPosition(ctx context.Context) (Replay, error) {
	var r Replay
	var lsn *string
	var last *time.Time
	if err := s.pool.QueryRow(ctx, rq.ReplayPosition).Scan(&r.Standby, &lsn, &last, &r.Now); err != nil {
		return r, fmt.Errorf("couldn't read the replica's replay position: %w", err)
	}
	if !r.Standby || lsn == nil {
		return Replay{Now: r.Now}, nil
	}
	if last != nil {
		r.LastCommit = *last
	}
	var err error
	r.LSN, err = ParseLSN(*lsn)
	return r, err
}

// Lag is how far a read replica is behind its primary.
type Lag struct {
	Primary, Replayed LSN
	// Bytes of WAL the primary wrote that the replica has not replayed.
	Bytes uint64
	// Behind is how old the replica's newest commit is while it is behind
	// (its clock against the primary's commit time); 0 once it has
	// replayed everything, also on an idle primary.
	Behind time.Duration
}

// ErrNotStandby is returned by LagBehind for a replica that is not a
// streaming standby (a server not in recovery), whose lag cannot be read
// from the WAL.
var ErrNotStandby = errors.New("the read replica is not a standby in recovery")

// LagBehind measures how far s, a read replica, is behind primary. The
// primary is read first, so a commit between the two reads can only make
// the lag look smaller than it was a moment before, never larger.
func (s *Store) LagBehind(ctx context.Context, primary *Store) (Lag, error) {
	pos, err := primary.WALPosition(ctx)
	if err != nil {
		return Lag{}, err
	}
	r, err := s.ReplayPosition(ctx)
	if err != nil {
		return Lag{}, err
	}
	if !r.Standby {
		return Lag{}, ErrNotStandby
	}
	lag := Lag{Primary: pos, Replayed: r.LSN}
	if r.LSN < pos {
		lag.Bytes = uint64(pos - r.LSN)
		if !r.LastCommit.IsZero() {
			lag.Behind = max(r.Now.Sub(r.LastCommit), 0)
		}
	}
	return lag, nil
}

// CatchUp waits until s, a read replica, has replayed everything primary
// had written when CatchUp was called, polling every few milliseconds, and
// gives up after timeout. A replica that is not in recovery (promoted)
// needs no wait. A read that must agree with something read from
// the primary (a checkpoint of the Merkle log, whose leaves name committed
// entries) calls it in between.
func (s *Store) CatchUp(ctx context.Context, primary *Store, timeout time.Duration) error {
	target, err := primary.WALPosition(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		r, err := s.ReplayPosition(ctx)
		if err != nil {
			return err
		}
		// A replica no longer in recovery was promoted: after a failover
		// it is the primary, and holds everything it committed.
		if !r.Standby || r.LSN >= target {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the read replica has replayed the WAL to %s, short of the primary's %s, after %v", r.LSN, target, timeout)
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
}
