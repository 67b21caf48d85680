package pgstore

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// ErrClosed is returned by Append on a closed store. An Append that raced
// with Close may or may not have been stored; retrying it elsewhere is safe
// because appends are idempotent.
var ErrClosed = errors.New("ledger store closed")

// Group commit: Append parses and validates in the caller's goroutine, then
// queues the entry to the committer that owns its session. A committer takes
// everything queued (lingering up to MaxDelay when it found company), plans
// it against fresh state and writes it in one transaction, and only after
// the commit returns (synchronous_commit: durable) hands each waiter its own
// result. An entry that fails its own checks (hash mismatch, conflict) gets
// its error without stopping the others; if the transaction itself fails,
// the committer bisects the group until the failing entry stands alone, so
// that one bad entry cannot fail its neighbours.

type pending struct {
	ctx  context.Context
	p    plan.Prepared
	done chan outcome // buffered: the committer never blocks on delivery
}

type outcome struct {
	res ledger.Appended
	err error
}

type committer struct {
	in chan *pending
}

var seed = maphash.MakeSeed()

func (s *Store) startCommitters() {
	var wg sync.WaitGroup
	for range s.opts.Committers {
		c := &committer{in: make(chan *pending, s.opts.MaxBatch)}
		s.committers = append(s.committers, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(c)
		}()
	}
	go func() {
		wg.Wait()
		close(s.stopped)
	}()
}

// Append implements ledger.Store. If ctx ends first, Append returns its
// error and the entry may or may not be stored; a retry is idempotent.
func (s *Store) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, err
	}
	w := &pending{ctx: ctx, p: p, done: make(chan outcome, 1)}
	c := s.committers[maphash.String(seed, r.SessionID)%uint64(len(s.committers))]
	select {
	case c.in <- w:
	case <-s.closing:
		return ledger.Appended{}, ErrClosed
	case <-ctx.Done():
		return ledger.Appended{}, ctx.Err()
	}
	select {
	case o := <-w.done:
		return o.res, o.err
	case <-s.stopped:
		// The committer may have delivered just before stopping.
		select {
		case o := <-w.done:
			return o.res, o.err
		default:
			return ledger.Appended{}, ErrClosed
		}
	case <-ctx.Done():
		return ledger.Appended{}, ctx.Err()
	}
}

func (s *Store) run(c *committer) {
	for {
		var first *pending
		select {
		case first = <-c.in:
		case <-s.closing:
			// Write what was queued before Close, then stop.
			for {
				select {
				case w := <-c.in:
					s.flush(s.gather(c, w, false))
				default:
					return
				}
			}
		}
		s.flush(s.gather(c, first, true))
	}
}

// gather collects the batch that starts with first: everything already
// queued and, if that was more than first alone and linger is set, whatever
// arrives within MaxDelay, up to MaxBatch.
func (s *Store) gather(c *committer, first *pending, linger bool) []*pending {
	batch := []*pending{first}
	for len(batch) < s.opts.MaxBatch {
		select {
		case w := <-c.in:
			batch = append(batch, w)
			continue
		default:
		}
		break
	}
	if !linger || len(batch) == 1 || s.opts.MaxDelay <= 0 {
		return batch
	}
	timer := time.NewTimer(s.opts.MaxDelay)
	defer timer.Stop()
	for len(batch) < s.opts.MaxBatch {
		select {
		case w := <-c.in:
			batch = append(batch, w)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// flush writes a batch and answers every waiter.
func (s *Store) flush(batch []*pending) {
	live := batch[:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- outcome{err: err} // the caller gave up before the write
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	// The transaction serves many callers, so no single caller's context
	// may cancel it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.commitGroup(ctx, live)
}

// commitGroup writes ws in one transaction. If the transaction fails as a
// whole, it splits ws in halves and commits each (first half first, which
// keeps every session's order), so a bad entry costs its neighbours a few
// extra transactions, not their writes.
func (s *Store) commitGroup(ctx context.Context, ws []*pending) {
	ps := make([]plan.Prepared, len(ws))
	for i, w := range ws {
		ps[i] = w.p
	}
	p, err := s.apply(ctx, ps, false)
	switch {
	case err == nil:
		for i, w := range ws {
			w.done <- outcome{res: p.Results[i], err: p.Errs[i]}
		}
	case len(ws) == 1:
		ws[0].done <- outcome{err: err}
	default:
		s.commitGroup(ctx, ws[:len(ws)/2])
		s.commitGroup(ctx, ws[len(ws)/2:])
	}
}
