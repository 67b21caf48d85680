package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

//go:embed queries.sql
var queriesSQL string

// queries are the named queries of queries.sql, the write path's, one
// field each (sqlq.Load): a misspelt query name stops the package at
// initialisation, before any test or server runs.
type queries struct {
	LockSessions, SessionStates, StoredBySteps, InsertSessions, WriteGroup,
	LogDequeue, LogInsertSessionTiles, LogInsertTiles,
	IngestedKeys, IngestedReplayKeys, InsertIngestRecords, InsertQuarantine, InsertSources,
	SearchByStore string
}

var q = sqlq.Load[queries](queriesSQL)

const maxAttempts = 20

// copyMin is the group size from which entries are written with COPY.
const copyMin = 64

var entryColumns = []string{"session_id", "position", "entry_hash", "previous_hash", "entry_id",
	"step_id", "step_type", "entry_timestamp", "recorded_at", "content"}

// settle ends a write transaction of attempt that returned err. On
// success it counts the commit and caches the heads p moved (p may be
// nil). On an error it forgets the cached heads of the sessions of ps and,
// when the error is a lost race and attempts remain, counts the replan,
// waits out the attempt's delay and reports again: the error it returns
// then is the wait's, nil unless ctx ended. Otherwise it returns err.
func (s *Store) settle(ctx context.Context, err error, attempt int, ps []plan.Prepared, p *plan.Plan) (again bool, _ error) {
	if err == nil {
		s.commits.Add(1)
		if p != nil {
			s.heads.put(p.Moves)
		}
		return false, nil
	}
	s.heads.forget(plan.SessionIDs(ps))
	if retryable(err) && attempt < maxAttempts {
		s.replans.Add(1)
		return true, sleepCtx(ctx, retryDelay(attempt))
	}
	return false, err
}

// apply plans ps against the current state and writes the plan in one
// transaction, retrying from fresh state when a concurrent writer got in
// between. With allOrNothing, any per-record error aborts the whole write
// and is returned; otherwise records that fail are left out and their
// errors are in the returned plan.
func (s *Store) apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	for attempt := 1; ; attempt++ {
		var p *plan.Plan
		err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			// Replay keys are claimed once per transaction, with the
			// first read; records they refuse stay refused on a re-plan.
			var refused map[int]error
			// locked: a planning round trip took the sessions' locks.
			var locked bool
			// The first attempt assumes no record is a retry and skips the
			// step lookup; if one is, the (session_id, step_id) key refuses
			// the insert and the next attempt looks steps up.
			// Records with a signer always look steps up: a retry must not
			// be signed as a new entry.
			if p, locked, err = s.plan(ctx, tx, ps, attempt > 1 || anySigner(ps), true, &refused); err != nil {
				return err
			}
			// A failing record may be a retry judged without its stored
			// original: judge again with the lookup.
			if attempt == 1 && p.Failed() != nil {
				var again bool
				if p, again, err = s.plan(ctx, tx, ps, true, false, &refused); err != nil {
					return err
				}
				locked = locked || again
			}
			if allOrNothing {
				if err := p.Failed(); err != nil {
					return err
				}
			}
			if s.beforeWrite != nil {
				if err := s.beforeWrite(p); err != nil {
					return err
				}
			}
			return s.write(ctx, tx, p, locked)
		})
		if err != nil && pgconn.Timeout(err) {
			// The server did not answer within the commit's timeout: it
			// stalls (frozen, or cut off) while its connections stay up.
			// Every pooled connection to it would hang the same way, so
			// drop them all; new ones go to whichever host takes writes.
			s.pool.Reset()
		}
		again, err := s.settle(ctx, err, attempt, ps, p)
		if again && err == nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// lockKeys returns the advisory lock keys of sessions (LockSessions): a
// 64-bit FNV-1a hash of each id, distinct and sorted. Two ids with one key
// only take turns needlessly.
func lockKeys(sessions []string) []int64 {
	keys := make([]int64, 0, len(sessions))
	for _, id := range sessions {
		h := fnv.New64a()
		h.Write([]byte(id))
		keys = append(keys, int64(h.Sum64()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// retryDelay is how long to wait before attempt+1 after attempt lost to a
// concurrent writer. The first retry is immediate: usually one other
// writer got in between once. After that the writers are in step (two
// processes appending to one session, each committing as the other
// re-plans), and an immediate retry loses again and again; a random wait
// that doubles up to a few milliseconds takes the writers out of step.
func retryDelay(attempt int) time.Duration {
	if attempt < 2 {
		return 0
	}
	d := 100 * time.Microsecond << min(attempt-2, 6) // up to 6.4 ms
	return d/2 + rand.N(d/2)
}

// sleepCtx waits d, or returns ctx's error if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plan reads the touched sessions' heads and, with lookup, any stored
// entries with the same (session, step_id), in one round trip, and plans ps
// against them. With claim, that round trip also inserts the records'
// replay keys and sets *refused to the records whose key was a replay;
// either way the records in *refused are left out of the plan. locked
// reports whether that round trip took place, and with it the sessions'
// locks; it is skipped when the lock would be all it held.
func (s *Store) plan(ctx context.Context, tx pgx.Tx, ps []plan.Prepared, lookup, claim bool, refused *map[int]error) (p *plan.Plan, locked bool, err error) {
	keySessions, keySteps := make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		keySessions[i], keySteps[i] = p.SessionID, p.Entry.StepID
	}
	stored := make(map[plan.Key]plan.Stored)
	// Heads this process committed last are taken from the cache; the
	// compare-and-swap catches a stale one and the retry reads afresh.
	states, missing := s.heads.get(plan.SessionIDs(ps), !lookup)
	b := &pgx.Batch{}
	// The sessions are locked before their heads are read; write locks
	// them again (a no-op then), which matters when every head came from
	// the cache and there is nothing to read here.
	b.Queue(q.LockSessions, lockKeys(plan.SessionIDs(ps)))
	if claim {
		queueClaim(b, ps, refused)
	}
	if len(missing) > 0 {
		b.Queue(q.SessionStates, missing).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				var st plan.State
				var head []byte
				if err := rows.Scan(&id, &st.AgentID, &st.Writer, &st.Length, &head); err != nil {
					return err
				}
				copy(st.Head[:], head)
				states[id] = st
			}
			return rows.Err()
		})
	}
	if lookup {
		b.Queue(q.StoredBySteps, keySessions, keySteps).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k plan.Key
				var old plan.Stored
				var eh, ph []byte
				if err := rows.Scan(&k.SessionID, &k.StepID, &old.Position, &eh, &ph, &old.Content); err != nil {
					return err
				}
				copy(old.EntryHash[:], eh)
				old.PreviousHash = sqlstore.HashPtr(ph)
				stored[k] = old
			}
			return rows.Err()
		})
	}
	if b.Len() > 1 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, false, fmt.Errorf("couldn't read session state: %w", err)
		}
		locked = true
	}
	return plan.MakeExcept(ps, states, stored, *refused), locked, nil
}

// write inserts a plan's new sessions and entries, moves its heads and
// stores the responses and params beside the entries, in one statement
// (WriteGroup) whatever the group's size, or, for a group of copyMin
// entries or more, COPY for the entries and that statement for the rest.
// locked says the plan's round trip took the sessions' locks already.
func (s *Store) write(ctx context.Context, tx pgx.Tx, p *plan.Plan, locked bool) error {
	if len(p.Rows) == 0 {
		return nil
	}
	now := s.opts.Clock()()
	var g groupRows
	for _, m := range p.Moves {
		if m.Created {
			g.newIDs = append(g.newIDs, m.SessionID)
			g.newAgents = append(g.newAgents, m.AgentID)
			g.newWriters = append(g.newWriters, m.Writer)
			g.newLens = append(g.newLens, m.ToLength)
			g.newHeads = append(g.newHeads, m.ToHead[:])
			continue
		}
		g.mvIDs = append(g.mvIDs, m.SessionID)
		g.mvFromLen = append(g.mvFromLen, m.FromLength)
		g.mvFrom = append(g.mvFrom, m.FromHead[:])
		g.mvToLen = append(g.mvToLen, m.ToLength)
		g.mvTo = append(g.mvTo, m.ToHead[:])
	}
	g.newHeadIDs = g.newIDs
	n := len(p.Rows)
	g.sessionIDs, g.entryIDs, g.stepIDs, g.stepTypes, g.stamps = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	g.positions = make([]int64, n)
	g.hashes, g.prevs, g.contents = make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range p.Rows {
		g.sessionIDs[i], g.positions[i], g.hashes[i] = r.SessionID, r.Position, r.EntryHash[:]
		if r.PreviousHash != nil {
			g.prevs[i] = r.PreviousHash[:]
		}
		e := r.Entry
		g.entryIDs[i], g.stepIDs[i], g.stepTypes[i], g.stamps[i], g.contents[i] = e.EntryID, e.StepID, e.StepType, e.Timestamp, e.Content
	}
	for i, signed := range p.Signed {
		if signed != nil && !p.Results[i].Replayed && p.Errs[i] == nil {
			g.rsIDs = append(g.rsIDs, p.Results[i].SessionID)
			g.rsPos = append(g.rsPos, p.Results[i].Position)
			g.rsBytes = append(g.rsBytes, signed)
		}
	}
	for i, params := range p.Params {
		if params != nil && !p.Results[i].Replayed && p.Errs[i] == nil {
			sealed, err := s.opts.SealParams(p.Results[i].SessionID, p.Results[i].Position, params)
			if err != nil {
				return err
			}
			g.rqIDs = append(g.rqIDs, p.Results[i].SessionID)
			g.rqPos = append(g.rqPos, p.Results[i].Position)
			g.rqBytes = append(g.rqBytes, sealed)
			var tool *string
			if t := ledger.ToolName(params); t != "" {
				tool = &t
			}
			g.rqTools = append(g.rqTools, tool)
		}
	}

	b := &pgx.Batch{}
	if !locked {
		moved := make([]string, len(p.Moves))
		for i, m := range p.Moves {
			moved[i] = m.SessionID
		}
		b.Queue(q.LockSessions, lockKeys(moved))
	}
	if n >= copyMin {
		// Large groups: COPY is cheaper than a multi-row INSERT, but cannot
		// join a pipeline, so this costs two more round trips. The sessions
		// must exist before their entries are copied.
		if len(g.newIDs) > 0 {
			b.Queue(q.InsertSessions, g.newIDs, g.newAgents, g.newWriters, now).Exec(expectRows("creating sessions", len(g.newIDs)))
		}
		// The group's search rows, projected here and COPYed after the
		// entries, in place of the projection trigger's (migration 0022).
		search := projectGroup(p, g.rqIDs, g.rqPos, g.rqTools)
		if search != nil {
			b.Queue(q.SearchByStore, "on")
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				if errors.Is(err, sqlstore.ErrHeadMoved) {
					return err
				}
				return fmt.Errorf("couldn't create sessions: %w", err)
			}
			b = &pgx.Batch{}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"}, entryColumns, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
			return []any{g.sessionIDs[i], g.positions[i], g.hashes[i], g.prevs[i], g.entryIDs[i], g.stepIDs[i], g.stepTypes[i], g.stamps[i], now, g.contents[i]}, nil
		}))
		if err != nil {
			return fmt.Errorf("couldn't insert entries: %w", err)
		}
		if search != nil {
			if err := copySearch(ctx, tx, p, search, now); err != nil {
				return err
			}
			b.Queue(q.SearchByStore, "off")
		}
		g.newIDs, g.newAgents, g.newWriters = nil, nil, nil
		g.sessionIDs, g.positions, g.hashes, g.prevs, g.entryIDs, g.stepIDs, g.stepTypes, g.stamps, g.contents = nil, nil, nil, nil, nil, nil, nil, nil, nil
	}
	var wrote [6]int64
	b.Queue(q.WriteGroup,
		g.newIDs, g.newAgents, g.newWriters,
		g.newHeadIDs, g.newLens, g.newHeads,
		g.mvIDs, g.mvFromLen, g.mvFrom, g.mvToLen, g.mvTo,
		g.sessionIDs, g.positions, g.hashes, g.prevs, g.entryIDs, g.stepIDs, g.stepTypes, g.stamps, g.contents,
		g.rsIDs, g.rsPos, g.rsBytes,
		g.rqIDs, g.rqPos, g.rqBytes, g.rqTools,
		now,
	).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&wrote[0], &wrote[1], &wrote[2], &wrote[3], &wrote[4], &wrote[5]); err != nil {
			return err
		}
		// A shortfall means a concurrent writer created the session or
		// moved the head first.
		for i, want := range []struct {
			what string
			n    int
		}{
			{"creating sessions", len(g.newIDs)}, {"creating heads", len(g.newHeadIDs)},
			{"moving heads", len(g.mvIDs)}, {"inserting entries", len(g.sessionIDs)},
			{"storing responses", len(g.rsIDs)}, {"storing request params", len(g.rqIDs)},
		} {
			if wrote[i] != int64(want.n) {
				return fmt.Errorf("%s: %d of %d rows: %w", want.what, wrote[i], want.n, sqlstore.ErrHeadMoved)
			}
		}
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, sqlstore.ErrHeadMoved) {
			return err
		}
		return fmt.Errorf("couldn't write entries: %w", err)
	}
	return nil
}

// groupRows are the columns of one group commit's rows, as WriteGroup
// takes them: one array per column.
type groupRows struct {
	newIDs, newAgents, newWriters []string // sessions to create
	newHeadIDs                    []string // their heads
	newLens                       []int64
	newHeads                      [][]byte
	mvIDs                         []string // heads to move
	mvFromLen, mvToLen            []int64
	mvFrom, mvTo                  [][]byte
	sessionIDs, entryIDs          []string // entries
	stepIDs, stepTypes, stamps    []string
	positions                     []int64
	hashes, prevs, contents       [][]byte
	rsIDs                         []string // signed responses
	rsPos                         []int64
	rsBytes                       [][]byte
	rqIDs                         []string // sealed request params
	rqPos                         []int64
	rqBytes                       [][]byte
	rqTools                       []*string
}

// expectRows checks a statement's row count; a shortfall means a
// concurrent writer created the session or moved the head first.
func expectRows(what string, want int) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(want) {
			return fmt.Errorf("%s: %w", what, sqlstore.ErrHeadMoved)
		}
		return nil
	}
}

// headCache remembers the heads this process committed last, so that an
// append to a session it wrote recently skips reading the head. It is only
// a guess: every head move is still a compare-and-swap, and a failed
// transaction forgets its sessions, so the retry reads them afresh.
type headCache struct {
	mu sync.Mutex
	m  map[string]plan.State
}

// maxCachedHeads bounds the cache; past it, the cache starts over.
const maxCachedHeads = 100_000

// get returns the cached states of ids (none unless use is set) and the ids
// it does not have.
func (c *headCache) get(ids []string, use bool) (map[string]plan.State, []string) {
	states := make(map[string]plan.State, len(ids))
	if !use {
		return states, ids
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if st, ok := c.m[id]; ok {
			states[id] = st
		} else {
			missing = append(missing, id)
		}
	}
	return states, missing
}

func (c *headCache) put(moves []plan.Move) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(moves) > maxCachedHeads {
		c.m = make(map[string]plan.State)
	}
	for _, m := range moves {
		c.m[m.SessionID] = plan.State{AgentID: m.AgentID, Writer: m.Writer, Length: m.ToLength, Head: m.ToHead}
	}
}

func (c *headCache) forget(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.m, id)
	}
}

func anySigner(ps []plan.Prepared) bool {
	for _, p := range ps {
		if p.Sign != nil {
			return true
		}
	}
	return false
}

// Commits returns how many append transactions the store has committed
// since Open: with Append's results, the mean group size.
func (s *Store) Commits() int64 { return s.commits.Load() }
