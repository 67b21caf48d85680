package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// Sink takes batches of events. Send returns nil only once the receiver
// acknowledged the whole batch (RELP rsp, HTTP 2xx, HEC ack, OTLP
// success, an fsynced file): the cursor moves after it, and the entries
// count as acknowledged. A sink that cannot know what its receiver kept
// implements UnconfirmedSink besides. Send must give up by ctx and must
// not hold the batch after it returns. An error that wraps ErrNotSent or
// a failed dial (net.OpError "dial") says nothing of the batch left, so
// that sending it again is not counted as a re-send.
type Sink interface {
	Send(ctx context.Context, batch []Event) error
	Close() error
}

// ErrNotSent marks a Send error after which nothing of the batch reached
// the network (the receiver could not be reached).
var ErrNotSent = errors.New("nothing of the batch was sent")

// UnconfirmedSink is a Sink whose receiver never confirms anything:
// plain TCP syslog, where a write succeeds into a socket whose peer has
// already stopped and the loss shows at a later write or never. Its Send
// returns nil once the batch is written to the connection Conn names,
// and those entries count as sent_unconfirmed, never as acknowledged.
//
// For such a sink the Deliverer keeps a re-send window (docs/export.md):
// what was written stays in it, and the durable cursor at its start,
// until the connection is found still open ResendWindow after the write.
// When a Send or Check fails, or the sink is on a new connection,
// everything in the window is sent again; after a restart, everything
// from the cursor is. The window is re-read from the ledger, never
// buffered.
type UnconfirmedSink interface {
	Sink
	// Conn names the connection the last Send wrote to or Check found; it
	// changes each time the sink connects again.
	Conn() uint64
	// Check reports whether the receiver still holds the connection open
	// (connecting when there is none): an error means what was written
	// to the connection may be lost. It must give up by ctx.
	Check(ctx context.Context) error
	// ResendWindow is how long written entries stay in the window once
	// the connection is found open after them (0: until the next check).
	ResendWindow() time.Duration
}

// DefaultResendMax bounds a re-send window (Deliverer.ResendMax).
const DefaultResendMax = 100_000

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
	// Wake, when not nil, wakes it sooner. An UnconfirmedSink's
	// connection is checked at each look.
	Poll time.Duration
	Wake <-chan struct{}
	// Timeout bounds one Send or Check (default 30s): a receiver that
	// accepts the connection and never reads fails the batch, which is
	// retried.
	Timeout time.Duration
	// MaxBackoff caps the wait between failed attempts (default 30s).
	MaxBackoff time.Duration
	// ResendMax bounds an UnconfirmedSink's re-send window in entries
	// (default DefaultResendMax): past it the oldest leave the window
	// whatever their age.
	ResendMax int
	Logger    *slog.Logger
	Now       func() time.Time

	unconfirmed UnconfirmedSink // Sink, when it is one
	// The re-send window of an UnconfirmedSink: the next leaf to send on
	// the current connection (the cursor's Next after a rewind), the
	// connection, and the batches written on it, oldest first.
	pos     uint64
	conn    uint64
	written []written

	mu     sync.Mutex
	status Status
}

// written is a batch in the re-send window: the leaves before end, written
// at at.
type written struct {
	end uint64
	at  time.Time
}

// Status is a sink's delivery state (GET /api/v1/exports, /metrics,
// docs/export.md "Counters").
type Status struct {
	Name string `json:"name"`
	// Delivery is "acknowledged" for a sink whose receiver confirms what
	// it took, "sent_unconfirmed" for one that never does (plain TCP
	// syslog); "" for a cursor no configured sink has.
	Delivery string `json:"delivery,omitempty"`
	// Cursor is the wire cursor of the entry before NextLeaf ("" before
	// the first).
	Cursor string `json:"cursor"`
	// NextLeaf is where delivery resumes after a restart: the first leaf
	// not acknowledged, or the start of the re-send window. SentTo is
	// the end of what was sent at least once. LogSize is the log's.
	NextLeaf uint64 `json:"next_leaf"`
	SentTo   uint64 `json:"sent_to"`
	LogSize  uint64 `json:"log_size"`
	// EntriesBehind counts entries not acknowledged (LogSize - NextLeaf)
	// or, for a sink that never confirms, never sent (LogSize - SentTo);
	// SecondsBehind is the age of the oldest of them (0 when caught up).
	EntriesBehind uint64  `json:"entries_behind"`
	SecondsBehind float64 `json:"seconds_behind"`
	// ResendWindow counts the entries a sink that never confirms would
	// send again if its connection failed now (SentTo - NextLeaf).
	ResendWindow uint64 `json:"resend_window"`
	// The counts of ledger.ExportCursor.
	Acknowledged    int64 `json:"acknowledged"`
	SentUnconfirmed int64 `json:"sent_unconfirmed"`
	Resent          int64 `json:"resent"`
	// Failing is true while the last attempt to send or to check the
	// connection failed.
	Failing     bool       `json:"failing"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	LastSentAt  *time.Time `json:"last_sent_at,omitempty"`
}

// StoredStatus is the state of a sink known only by its stored cursor c,
// in a log of size leaves.
func StoredStatus(c ledger.ExportCursor, size uint64) Status {
	st := Status{Name: c.Name}
	st.fromCursor(c, c.SentUnconfirmed > 0)
	st.LogSize = max(size, c.SentTo)
	st.EntriesBehind = st.LogSize - st.done(c.SentUnconfirmed > 0)
	return st
}

func (st *Status) fromCursor(c ledger.ExportCursor, unconfirmed bool) {
	st.NextLeaf, st.SentTo = c.Next, c.SentTo
	st.Cursor = Cursor{Leaf: c.Next}.String()
	st.Acknowledged, st.SentUnconfirmed, st.Resent = c.Acknowledged, c.SentUnconfirmed, c.Resent
	st.ResendWindow = 0
	if unconfirmed {
		st.ResendWindow = c.SentTo - c.Next
	}
}

// done is the end of what the sink has done with as far as it can know:
// acknowledged, or sent when it never confirms.
func (st *Status) done(unconfirmed bool) uint64 {
	if unconfirmed {
		return st.SentTo
	}
	return st.NextLeaf
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
	// A batch is one page of the store: a longer one would come back
	// short and read as leaves missing from the ledger.
	d.Batch = min(d.Batch, ledger.MaxExportPage)
	if d.Poll <= 0 {
		d.Poll = time.Second
	}
	if d.Timeout <= 0 {
		d.Timeout = 30 * time.Second
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = 30 * time.Second
	}
	if d.ResendMax <= 0 {
		d.ResendMax = DefaultResendMax
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	d.unconfirmed, _ = d.Sink.(UnconfirmedSink)
}

// Run delivers until ctx ends, then closes the sink. Errors of the sink or
// the store are logged, kept in Status and retried with backoff; Run
// returns only ctx's error.
func (d *Deliverer) Run(ctx context.Context) error {
	d.defaults()
	d.mu.Lock()
	d.status.Name = d.Name
	d.status.Delivery = "acknowledged"
	if d.unconfirmed != nil {
		d.status.Delivery = "sent_unconfirmed"
	}
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
		if errors.Is(err, ledger.ErrCursorMoved) {
			// The stored cursor is not the one this loop wrote last (a
			// write whose commit was reported lost, or another process
			// under the same name): go on from the stored one.
			if stored, lerr := d.load(ctx); lerr == nil {
				c = stored
			}
		}
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

// load reads the sink's cursor, creating it at the start of the log.
// Delivery resumes at its Next: the leaves from there to SentTo were sent
// before (a re-send window, a batch whose acknowledgement never came) and
// count as resent when they are sent again.
func (d *Deliverer) load(ctx context.Context) (ledger.ExportCursor, error) {
	c, err := d.Store.ExportCursor(ctx, d.Name)
	if errors.Is(err, ledger.ErrNotFound) {
		c = ledger.ExportCursor{Name: d.Name, UpdatedAt: d.Now().UTC()}
		if err := d.Store.PutExportCursor(ctx, c, 0); err != nil {
			return c, err
		}
		c, err = d.Store.ExportCursor(ctx, d.Name)
	}
	if err != nil {
		return c, err
	}
	if c.SentTo > c.Next {
		d.Logger.Info("export: sending again what was sent before the restart and not acknowledged",
			"sink", d.Name, "from_leaf", c.Next, "to_leaf", c.SentTo)
	}
	d.pos, d.written = c.Next, nil
	d.setCursor(c)
	return c, nil
}

// step sends one batch, or, with nothing to send, checks an
// UnconfirmedSink's connection; it reports whether it is caught up.
func (d *Deliverer) step(ctx context.Context, c *ledger.ExportCursor) (bool, error) {
	size, err := d.Store.LogSize(ctx)
	if err != nil {
		return false, err
	}
	if d.pos >= size {
		d.setLag(size, size, time.Time{})
		if d.unconfirmed != nil {
			if err := d.check(ctx, c); err != nil {
				return false, err
			}
			return d.pos >= size, nil
		}
		d.ok(false)
		return true, nil
	}
	from := d.pos
	to := min(size, from+uint64(d.Batch))
	es, err := d.Store.ExportEntries(ctx, ledger.ExportFilter{From: from, To: to, Limit: d.Batch, WithParams: d.Encoder.wantsParams()})
	if err != nil {
		return false, err
	}
	if len(es) == 0 {
		return false, fmt.Errorf("leaves [%d, %d) have no entries to export", from, to)
	}
	// Every leaf of the range has its entry: a leaf without one is a gap
	// the receiver would never see, so delivery stops there.
	if es[0].LeafIndex != from || uint64(len(es)) != to-from {
		return false, fmt.Errorf("leaves [%d, %d): %d entries found, the ledger lacks some", from, to, len(es))
	}
	to = es[len(es)-1].LeafIndex + 1
	d.setLag(size, from, es[0].RecordedAt)
	batch := make([]Event, 0, len(es)+len(es)/4)
	for _, e := range es {
		evs, err := d.Encoder.Events(e)
		if err != nil {
			return false, err
		}
		batch = append(batch, evs...)
	}

	at := d.Now()
	sctx, cancel := context.WithTimeout(ctx, d.Timeout)
	err = d.Sink.Send(sctx, batch)
	cancel()
	if err != nil {
		d.rewind(c.Next)
		if to > c.SentTo && !notSent(err) {
			// The receiver may hold part of the batch: sending it again
			// is a re-send.
			marked := *c
			marked.SentTo, marked.UpdatedAt = to, d.Now().UTC()
			if d.unconfirmed != nil {
				marked.SentUnconfirmed += int64(to - max(from, c.SentTo))
			}
			if perr := d.Store.PutExportCursor(context.WithoutCancel(ctx), marked, c.Next); perr != nil {
				// The mark stays known here when the store did not
				// record it (a failover took the write; its Next is the
				// stored one, so the next write records it): the batch
				// sent again still counts as resent.
				*c = marked
				d.setCursor(marked)
				return false, errors.Join(err, perr)
			}
			*c = marked
			d.setCursor(marked)
		}
		return false, err
	}

	n := int64(to - from)
	resent := int64(0)
	if c.SentTo > from {
		resent = int64(min(c.SentTo, to) - from)
	}
	moved := *c
	moved.SentTo = max(c.SentTo, to)
	moved.Resent += resent
	d.pos = to
	if d.unconfirmed == nil {
		moved.Next = to
		moved.Acknowledged += n
	} else {
		moved.SentUnconfirmed += n - resent
		if conn := d.unconfirmed.Conn(); conn != d.conn {
			// A new connection: what the window held before this batch
			// went over the old one and is sent again.
			d.conn, d.written = conn, nil
			if from > c.Next {
				d.pos = c.Next
			}
		}
		if d.pos == to {
			d.written = append(d.written, written{end: to, at: at})
		}
		moved.Next = d.slide(c.Next, at)
	}
	moved.UpdatedAt = d.Now().UTC()
	// The cursor write outlives ctx: the batch was sent.
	if err := d.Store.PutExportCursor(context.WithoutCancel(ctx), moved, c.Next); err != nil {
		// What the store did not record stays known here (a failover
		// took the write): sending the batch again counts as resent,
		// and the next write records the counts.
		if d.unconfirmed != nil {
			moved.Next = c.Next
			*c = moved
		} else {
			c.SentTo = moved.SentTo
			d.rewind(c.Next)
		}
		return false, err
	}
	*c = moved
	d.setCursor(moved)
	d.ok(true)
	return false, nil
}

// check asks an UnconfirmedSink whether its connection still stands; the
// window's batches it vouches for leave the window.
func (d *Deliverer) check(ctx context.Context, c *ledger.ExportCursor) error {
	at := d.Now()
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	err := d.unconfirmed.Check(cctx)
	cancel()
	if err != nil {
		d.rewind(c.Next)
		return err
	}
	if conn := d.unconfirmed.Conn(); conn != d.conn {
		d.conn, d.written = conn, nil
		if d.pos > c.Next {
			d.pos = c.Next // sent again on the new connection
		}
	}
	d.ok(false)
	next := d.slide(c.Next, at)
	if next == c.Next {
		return nil
	}
	moved := *c
	moved.Next, moved.UpdatedAt = next, d.Now().UTC()
	if err := d.Store.PutExportCursor(ctx, moved, c.Next); err != nil {
		return err
	}
	*c = moved
	d.setCursor(moved)
	return nil
}

// slide returns the re-send window's new start, from next, once the
// connection was found open at checked: a batch leaves the window when it
// was written more than the sink's ResendWindow before, or when the
// window holds more than ResendMax entries.
func (d *Deliverer) slide(next uint64, checked time.Time) uint64 {
	keep := d.unconfirmed.ResendWindow()
	for len(d.written) > 0 {
		w := d.written[0]
		if !w.at.Add(keep).Before(checked) && d.pos-next <= uint64(d.ResendMax) {
			break
		}
		next = w.end
		d.written = d.written[1:]
	}
	return next
}

// rewind starts the re-send window over at next, the cursor's: after a
// failed attempt, the next one sends again from there.
func (d *Deliverer) rewind(next uint64) {
	d.pos, d.written = next, nil
}

// notSent reports whether err says nothing of a batch left.
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrNotSent) || errors.As(err, &op) && op.Op == "dial"
}

// ok records a successful attempt (sent says a batch went out).
func (d *Deliverer) ok(sent bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status.Failing = false
	if sent {
		now := d.Now().UTC()
		d.status.LastSentAt = &now
	}
}

func (d *Deliverer) setCursor(c ledger.ExportCursor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.unconfirmed != nil
	d.status.fromCursor(c, u)
	d.status.LogSize = max(d.status.LogSize, c.SentTo)
	d.status.EntriesBehind = d.status.LogSize - d.status.done(u)
}

// setLag records the log's size and, when leaf from is the oldest not
// done with, its commit time oldest (a batch sent again leaves the age
// as it was).
func (d *Deliverer) setLag(size, from uint64, oldest time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status.LogSize = max(size, d.status.SentTo)
	done := d.status.done(d.unconfirmed != nil)
	d.status.EntriesBehind = d.status.LogSize - done
	switch {
	case d.status.EntriesBehind == 0:
		d.status.SecondsBehind = 0
	case from == done && !oldest.IsZero():
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
	d.status.Failing = true
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
