// Package groupcommit lets concurrent appends share transactions.
//
// Append validates in the caller's goroutine, then queues the entry to the
// queue that owns its session (a hash of the session id), so one session is
// always written by one queue and queues never race each other for a head.
// Each queue has at most one transaction in flight: it takes everything
// that arrived while its previous commit ran (lingering up to MaxDelay when
// it found company), writes it through Apply in one transaction, and only
// after Apply returns (the commit is durable) hands each waiter its own
// result. An entry that fails its own checks gets its error without
// stopping the others; if the transaction fails as a whole, the queue
// bisects the group until the failing entry stands alone, so one bad entry
// cannot fail its neighbours.
package groupcommit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// Apply writes the records of ps that pass their checks in one durable
// transaction and returns the plan, whose Errs hold the per-record
// failures. An error means nothing was written.
type Apply func(ctx context.Context, ps []plan.Prepared) (*plan.Plan, error)

// Options size the queues. Zero values take the defaults.
type Options struct {
	Queues   int           // default 2
	MaxBatch int           // default 512
	MaxDelay time.Duration // default 0: no lingering
	// Timeout bounds a group's transaction, retries included; default a
	// minute. A store whose server can stall (a frozen primary answers
	// nothing, and its TCP connection stays up) sets it shorter, so that
	// the waiting callers are told the ledger is unavailable and the
	// connection is dropped.
	Timeout time.Duration
}

// Committer is a set of group-commit queues.
type Committer struct {
	apply   Apply
	opts    Options
	queues  []chan *pending
	seed    maphash.Seed
	closing chan struct{}
	stopped chan struct{}
	once    sync.Once
}

type pending struct {
	ctx  context.Context
	p    plan.Prepared
	done chan outcome // buffered: a queue never blocks on delivery
}

type outcome struct {
	res    ledger.Appended
	signed []byte // the response built by p.Sign, if set
	err    error
}

// New starts the queues.
func New(apply Apply, o Options) *Committer {
	if o.Queues <= 0 {
		o.Queues = 2
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	c := &Committer{apply: apply, opts: o, seed: maphash.MakeSeed(),
		closing: make(chan struct{}), stopped: make(chan struct{})}
	var wg sync.WaitGroup
	for range o.Queues {
		q := make(chan *pending, o.MaxBatch)
		c.queues = append(c.queues, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(q)
		}()
	}
	go func() {
		wg.Wait()
		close(c.stopped)
	}()
	return c
}

// Close stops the queues after they have written what was queued.
func (c *Committer) Close() {
	c.once.Do(func() { close(c.closing) })
	<-c.stopped
}

// Append queues p and waits for its commit. It returns the response p.Sign
// built (nil without a signer, or for a replay: the store looks that up).
// If ctx ends first it returns ctx's error and the entry may or may not be
// stored; a retry is idempotent. On a closed Committer it returns
// ledger.ErrClosed.
func (c *Committer) Append(ctx context.Context, p plan.Prepared) (ledger.Appended, []byte, error) {
	w := &pending{ctx: ctx, p: p, done: make(chan outcome, 1)}
	q := c.queues[maphash.String(c.seed, p.SessionID)%uint64(len(c.queues))]
	select {
	case q <- w:
	case <-c.closing:
		return ledger.Appended{}, nil, ledger.ErrClosed
	case <-ctx.Done():
		return ledger.Appended{}, nil, ctx.Err()
	}
	select {
	case o := <-w.done:
		return o.res, o.signed, o.err
	case <-c.stopped:
		// The queue may have delivered just before stopping.
		select {
		case o := <-w.done:
			return o.res, o.signed, o.err
		default:
			return ledger.Appended{}, nil, ledger.ErrClosed
		}
	case <-ctx.Done():
		return ledger.Appended{}, nil, ctx.Err()
	}
}

func (c *Committer) run(q chan *pending) {
	for {
		var first *pending
		select {
		case first = <-q:
		case <-c.closing:
			// Write what was queued before Close, then stop.
			for {
				select {
				case w := <-q:
					c.flush(c.gather(q, w, false))
				default:
					return
				}
			}
		}
		c.flush(c.gather(q, first, true))
	}
}

// gather collects the group that starts with first: everything already
// queued and, if that was more than first alone and lingering is on,
// whatever arrives within MaxDelay, up to MaxBatch.
func (c *Committer) gather(q chan *pending, first *pending, linger bool) []*pending {
	group := []*pending{first}
drain:
	for len(group) < c.opts.MaxBatch {
		select {
		case w := <-q:
			group = append(group, w)
		default:
			break drain
		}
	}
	if !linger || len(group) == 1 || c.opts.MaxDelay <= 0 {
		return group
	}
	timer := time.NewTimer(c.opts.MaxDelay)
	defer timer.Stop()
	for len(group) < c.opts.MaxBatch {
		select {
		case w := <-q:
			group = append(group, w)
		case <-timer.C:
			return group
		}
	}
	return group
}

// flush writes a group and answers every waiter.
func (c *Committer) flush(group []*pending) {
	live := group[:0]
	for _, w := range group {
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
	timeout := c.opts.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c.commit(ctx, live)
}

// commit writes ws in one transaction. If the transaction fails as a whole,
// it splits ws in halves and commits each, first half first (which keeps
// every session's order), so a bad entry costs its neighbours a few extra
// transactions, not their writes.
func (c *Committer) commit(ctx context.Context, ws []*pending) {
	ps := make([]plan.Prepared, len(ws))
	for i, w := range ws {
		ps[i] = w.p
	}
	p, err := c.apply(ctx, ps)
	switch {
	case err == nil:
		for i, w := range ws {
			o := outcome{res: p.Results[i], err: p.Errs[i]}
			if p.Signed != nil {
				o.signed = p.Signed[i]
			}
			w.done <- o
		}
	case len(ws) == 1:
		ws[0].done <- outcome{err: err}
	default:
		c.commit(ctx, ws[:len(ws)/2])
		c.commit(ctx, ws[len(ws)/2:])
	}
}
