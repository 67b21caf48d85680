package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// Sink takes batches of events. Send returns nil only once the receiver
// has the whole batch (an HTTP 2xx, a flushed TCP write, an fsynced file):
// the cursor moves after it. Send must give up by ctx and must not hold
// the batch after it returns.
type Sink interface {
	Send(ctx context.Context, batch []Event) error
	Close() error
}

// Deliverer is one sink's delivery loop over the ledger.
type Deliverer struct {
	// Name is the sink's name; its cursor is stored under it.
	Name    string
	Store   Store
	Encoder Encoder
	Sink    Sink
	// Batch is the most entries handed to the sink at once (default 1000).
	Batch int
	// Poll is how often the loop looks for new leaves when caught up
	// (default 1s: about the Merkle log's own period, so a trickle of
	// entries costs at most one batch, two cursor commits, a second);
	// Wake, when not nil, wakes it sooner.
	Poll time.Duration
	Wake <-chan struct{}
	// Timeout bounds one Send (default 30s): a receiver that accepts the
	// connection and never reads fails the batch, which is retried.
	Timeout time.Duration
	// MaxBackoff caps the wait between failed attempts (default 30s).
	MaxBackoff time.Duration
	Logger     *slog.Logger
	Now        func() time.Time

	mu      sync.Mutex
	status  Status
	failure bool // the last attempt failed
}

func (d *Deliverer) failing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failure
}

// Status is a sink's delivery state (GET /api/v1/exports, /metrics).
type Status struct {
	Name string `json:"name"`
	// Cursor is the wire cursor of the last acknowledged event's entry
	// ("" before the first).
	Cursor string `json:"cursor"`
	// NextLeaf is the first leaf not acknowledged; LogSize the log's.
	NextLeaf uint64 `json:"next_leaf"`
	LogSize  uint64 `json:"log_size"`
	// EntriesBehind is LogSize - NextLeaf; SecondsBehind the age of the
	// oldest entry not acknowledged (0 when caught up).
	EntriesBehind uint64  `json:"entries_behind"`
	SecondsBehind float64 `json:"seconds_behind"`
	// Delivered counts acknowledged entries; Redelivered those of them
	// sent more than once (after a failed attempt or a restart), which a
	// receiver may hold twice.
	Delivered   int64      `json:"delivered"`
	Redelivered int64      `json:"redelivered"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	LastSentAt  *time.Time `json:"last_sent_at,omitempty"`
}

// Status returns the sink's current state.
func (d *Deliverer) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

func (d *Deliverer) defaults() {
	if d.Batch <= 0 {
		d.Batch = 1000
	}
	if d.Poll <= 0 {
		d.Poll = time.Second
	}
	if d.Timeout <= 0 {
		d.Timeout = 30 * time.Second
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = 30 * time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
}

// Run delivers until ctx ends, then closes the sink. Errors of the sink or
// the store are logged, kept in Status and retried with backoff; Run
// returns only ctx's error.
func (d *Deliverer) Run(ctx context.Context) error {
	d.defaults()
	d.mu.Lock()
	d.status.Name = d.Name
	d.mu.Unlock()
	defer d.Sink.Close()
	var c ledger.ExportCursor
	var err error
	backoff := time.Duration(0)
	for {
		if err = d.wait(ctx, backoff, nil); err != nil {
			return err
		}
		c, err = d.load(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = d.failed(err, backoff)
	}
	backoff = 0
	for {
		caughtUp, err := d.step(ctx, &c)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			backoff = d.failed(err, backoff)
			if err := d.wait(ctx, backoff, nil); err != nil {
				return err
			}
		case caughtUp:
			backoff = 0
			if err := d.wait(ctx, d.Poll, d.Wake); err != nil {
				return err
			}
		default:
			backoff = 0
		}
	}
}

// load reads the sink's cursor, creating it at the start of the log. A
// batch that was being sent when the process stopped is counted as
// redelivered: it is sent again.
func (d *Deliverer) load(ctx context.Context) (ledger.ExportCursor, error) {
	c, err := d.Store.ExportCursor(ctx, d.Name)
	if errors.Is(err, ledger.ErrNotFound) {
		c = ledger.ExportCursor{Name: d.Name, UpdatedAt: d.Now().UTC()}
		if err := d.Store.PutExportCursor(ctx, c, 0); err != nil {
			return c, err
		}
		return d.Store.ExportCursor(ctx, d.Name)
	}
	if err != nil {
		return c, err
	}
	if c.SendingTo > c.Next {
		d.Logger.Info("export: sending again what may have arrived before the restart",
			"sink", d.Name, "from_leaf", c.Next, "to_leaf", c.SendingTo)
	}
	d.setCursor(c)
	return c, nil
}

// step delivers one batch; it reports whether there was nothing to send.
func (d *Deliverer) step(ctx context.Context, c *ledger.ExportCursor) (bool, error) {
	size, err := d.Store.LogSize(ctx)
	if err != nil {
		return false, err
	}
	if c.Next >= size {
		d.setLag(size, time.Time{})
		d.mu.Lock()
		d.failure = false
		d.mu.Unlock()
		return true, nil
	}
	to := min(size, c.Next+uint64(d.Batch))
	es, err := d.Store.ExportEntries(ctx, ledger.ExportFilter{From: c.Next, To: to, Limit: d.Batch, WithParams: d.Encoder.wantsParams()})
	if err != nil {
		return false, err
	}
	if len(es) == 0 {
		return false, fmt.Errorf("leaves [%d, %d) have no entries to export", c.Next, to)
	}
	// Every leaf of the range has its entry: a leaf without one is a gap
	// the receiver would never see, so delivery stops there.
	if es[0].LeafIndex != c.Next || uint64(len(es)) != to-c.Next {
		return false, fmt.Errorf("leaves [%d, %d): %d entries found, the ledger lacks some", c.Next, to, len(es))
	}
	to = es[len(es)-1].LeafIndex + 1
	d.setLag(size, es[0].RecordedAt)
	batch := make([]Event, 0, len(es)+len(es)/4)
	for _, e := range es {
		evs, err := d.Encoder.Events(e)
		if err != nil {
			return false, err
		}
		batch = append(batch, evs...)
	}

	// Say what is being sent before sending it: if the process dies
	// before the cursor moves, the next start knows these leaves may
	// have arrived and counts them as redelivered.
	redelivered := int64(0)
	if c.SendingTo > c.Next {
		redelivered = int64(min(c.SendingTo, to) - c.Next)
	}
	if c.SendingTo < to {
		sending := *c
		sending.SendingTo, sending.UpdatedAt = to, d.Now().UTC()
		if err := d.Store.PutExportCursor(ctx, sending, c.Next); err != nil {
			return false, err
		}
		c.SendingTo = to
	}
	sctx, cancel := context.WithTimeout(ctx, d.Timeout)
	err = d.Sink.Send(sctx, batch)
	cancel()
	if err != nil {
		return false, err
	}
	moved := *c
	moved.Next, moved.SendingTo = to, max(c.SendingTo, to)
	moved.Delivered += int64(len(es))
	moved.Redelivered += redelivered
	moved.UpdatedAt = d.Now().UTC()
	// The cursor write outlives ctx: the batch was delivered.
	if err := d.Store.PutExportCursor(context.WithoutCancel(ctx), moved, c.Next); err != nil {
		return false, err
	}
	*c = moved
	d.setCursor(moved)
	now := d.Now().UTC()
	d.mu.Lock()
	d.status.LastSentAt = &now
	d.failure = false
	d.mu.Unlock()
	return false, nil
}

func (d *Deliverer) setCursor(c ledger.ExportCursor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status.NextLeaf = c.Next
	d.status.Cursor = Cursor{Leaf: c.Next}.String()
	d.status.Delivered, d.status.Redelivered = c.Delivered, c.Redelivered
	if d.status.LogSize < c.Next {
		d.status.LogSize = c.Next
	}
	d.status.EntriesBehind = d.status.LogSize - c.Next
}

// setLag records the log's size and the commit time of the oldest entry
// not delivered (zero: none).
func (d *Deliverer) setLag(size uint64, oldest time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status.LogSize = max(size, d.status.NextLeaf)
	d.status.EntriesBehind = d.status.LogSize - d.status.NextLeaf
	d.status.SecondsBehind = 0
	if !oldest.IsZero() {
		d.status.SecondsBehind = max(0, d.Now().Sub(oldest).Seconds())
	}
}

// failed records err and returns the next backoff: doubling from 100ms to
// MaxBackoff, with up to a quarter of jitter. The log line never holds
// the sink's URL (internal/exportsink's errors name the sink, not its
// credentials), and serve's logger throttles repeats.
func (d *Deliverer) failed(err error, prev time.Duration) time.Duration {
	now := d.Now().UTC()
	d.mu.Lock()
	d.status.LastError, d.status.LastErrorAt = err.Error(), &now
	d.failure = true
	d.mu.Unlock()
	d.Logger.Warn("export: delivery failed, retrying", "sink", d.Name, "err", err)
	next := min(max(2*prev, 100*time.Millisecond), d.MaxBackoff)
	return next - time.Duration(rand.Int64N(int64(next)/4+1))
}

// wait sleeps for dur, or until wake fires or ctx ends.
func (d *Deliverer) wait(ctx context.Context, dur time.Duration, wake <-chan struct{}) error {
	if dur <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-wake:
	}
	return nil
}
