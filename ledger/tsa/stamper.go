package tsa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// stampBatch bounds the checkpoints one round reads and stamps, so a long
// outage is caught up in bounded steps, oldest first.
const stampBatch = 64

// StamperConfig configures a [Stamper].
type StamperConfig struct {
	// Latest returns the size of the latest signed checkpoint, for the
	// lag gauge (tlog.Log.LatestCheckpoint); nil leaves the gauge at 0.
	Latest func(ctx context.Context) (uint64, error)
	// Retry is how often a round runs without being notified, and so how
	// soon an authority that was down is asked again (default 5 s).
	Retry time.Duration
	// Now is the clock of the stored stamped_at (default time.Now).
	Now func() time.Time
	// Logger receives failures (default discard).
	Logger *slog.Logger
}

// Stamper stamps every signed checkpoint that has no time-stamp yet,
// smallest first, and stores the responses. Run it beside the log and call
// Notify after each new checkpoint (tlog.Config.OnCheckpoint).
type Stamper struct {
	st     tlog.TimestampStorage
	c      *Client
	cfg    StamperConfig
	notify chan struct{}

	mu sync.Mutex // one round at a time; guards the fields below
	// floor: every checkpoint of size <= floor is stamped (the stamper
	// goes in size order, so the last stamped size is the floor).
	floor     uint64
	hasFloor  bool
	lastOK    time.Time // the last round that left nothing unstamped, or the last stamp
	unstamped int
}

// NewStamper returns a stamper storing into st what c's authority returns.
func NewStamper(st tlog.TimestampStorage, c *Client, cfg StamperConfig) *Stamper {
	if cfg.Retry <= 0 {
		cfg.Retry = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Stamper{st: st, c: c, cfg: cfg, notify: make(chan struct{}, 1), lastOK: cfg.Now()}
}

// Notify wakes the stamper early (a new checkpoint was stored). It never
// blocks.
func (s *Stamper) Notify() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Run stamps until ctx ends: after each Notify and every Retry. After a
// failed request it waits for the next Retry tick, not the next
// checkpoint, so a down authority is not asked several times a second.
func (s *Stamper) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Retry)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-s.notify:
			if failed {
				continue
			}
		}
		_, err := s.StampPending(ctx)
		failed = err != nil
		if failed && ctx.Err() == nil {
			s.cfg.Logger.Warn("time-stamping authority did not stamp; checkpoints stay unstamped until it does", "tsa", s.c.URL(), "err", err)
		}
	}
}

// StampPending runs one round: it stamps up to a bounded number of
// unstamped checkpoints, smallest first, stopping at the first failure
// (returned), and records the gap in the metrics. It returns how many it
// stamped.
func (s *Stamper) StampPending(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hasFloor {
		last, err := s.st.LastStamped(ctx)
		switch {
		case errors.Is(err, tlog.ErrNotFound):
			s.floor = 0
		case err != nil:
			return 0, fmt.Errorf("couldn't read the last stamped checkpoint: %w", err)
		default:
			s.floor = last
		}
		s.hasFloor = true
	}
	todo, err := s.st.Unstamped(ctx, s.floor, stampBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cp := range todo {
		resp, err := s.c.Stamp(ctx, cp.Note)
		if err == nil {
			err = s.st.AddTimestamp(ctx, cp.Size, resp, s.cfg.Now())
		}
		if err != nil {
			requests.Add(ctx, 1, resultFailed)
			s.record(ctx, len(todo)-n)
			return n, fmt.Errorf("checkpoint %d: %w", cp.Size, err)
		}
		requests.Add(ctx, 1, resultStamped)
		s.floor = cp.Size
		s.lastOK = s.cfg.Now()
		n++
	}
	left := 0
	if len(todo) == stampBatch {
		left = 1 // more wait beyond this round; the next one is due now
		s.Notify()
	}
	if left == 0 {
		s.lastOK = s.cfg.Now()
	}
	s.record(ctx, left)
	return n, nil
}

// record sets the gap gauges: how many checkpoints this round left
// unstamped (a lower bound past one batch), how long the log has gone
// without a stamp while some wait, and how many leaves the latest
// checkpoint is past the last stamped one.
func (s *Stamper) record(ctx context.Context, unstamped int) {
	s.unstamped = unstamped
	unstampedGauge.Record(ctx, int64(unstamped))
	age := 0.0
	if unstamped > 0 {
		age = s.cfg.Now().Sub(s.lastOK).Seconds()
	}
	unstampedSeconds.Record(ctx, age)
	stampedSize.Record(ctx, int64(s.floor))
	if s.cfg.Latest != nil {
		if latest, err := s.cfg.Latest(ctx); err == nil && latest >= s.floor {
			lagLeaves.Record(ctx, int64(latest-s.floor))
		}
	}
}

// Status is what the stamper last saw, for the dashboard and tests.
type Status struct {
	// StampedSize is the largest checkpoint size stamped (every smaller
	// checkpoint is stamped too, or predates none).
	StampedSize uint64
	// Unstamped is the number of checkpoints the last round left
	// unstamped (at least this many past one batch).
	Unstamped int
}

// Status returns the stamper's view after its last round.
func (s *Stamper) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{StampedSize: s.floor, Unstamped: s.unstamped}
}
