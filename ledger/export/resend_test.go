package export_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// lossySink is a plain TCP receiver as an UnconfirmedSink sees it: what
// is written waits unread (pending) until the receiver takes it; a
// receiver that dies loses what it had not taken, its death is noticed
// only at the next check or send, and a write into the dead connection
// may still succeed (blind).
type lossySink struct {
	mu      sync.Mutex
	window  time.Duration
	up      bool
	conn    uint64 // 0: none
	conns   uint64
	dead    bool
	blind   int
	dials   int
	pending []string
	kept    map[string]int
}

func newLossySink(window time.Duration) *lossySink {
	return &lossySink{window: window, up: true, kept: map[string]int{}}
}

var errClosed = errors.New("the receiver closed the connection")

func (s *lossySink) connect() error {
	s.dials++
	if !s.up {
		return fmt.Errorf("connection refused: %w", export.ErrNotSent)
	}
	s.conns++
	s.conn, s.dead = s.conns, false
	return nil
}

func (s *lossySink) Send(_ context.Context, batch []export.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != 0 && s.dead {
		if s.blind > 0 {
			s.blind-- // written into a socket whose peer is gone: lost
			return nil
		}
		s.conn = 0
		return fmt.Errorf("%w (%w)", errClosed, export.ErrNotSent)
	}
	if s.conn == 0 {
		if err := s.connect(); err != nil {
			return err
		}
	}
	for _, e := range batch {
		s.pending = append(s.pending, e.EntryHash)
	}
	return nil
}

func (s *lossySink) Check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != 0 && s.dead && s.blind == 0 {
		s.conn = 0
		return errClosed
	}
	if s.conn == 0 {
		return s.connect()
	}
	return nil
}

func (s *lossySink) Conn() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

func (s *lossySink) ResendWindow() time.Duration { return s.window }
func (s *lossySink) Close() error                { return nil }

// take is the receiver reading what was written to it; it returns how
// many of hashes it holds.
func (s *lossySink) take(hashes []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.pending {
		s.kept[h]++
	}
	s.pending = nil
	n := 0
	for _, h := range hashes {
		if s.kept[h] > 0 {
			n++
		}
	}
	return n
}

// kill stops the receiver: what it had not taken is lost, and until the
// next blind writes succeeded (into the void) the connection looks open.
func (s *lossySink) kill(blind int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.dead, s.up, s.blind = nil, true, false, blind
}

func (s *lossySink) setUp() {
	s.mu.Lock()
	s.up = true
	s.mu.Unlock()
}

func (s *lossySink) dialed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

func runDeliverer(t *testing.T, d *export.Deliverer) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// A receiver that never confirms dies with everything unread, and a
// batch is written into its dead connection before anyone can tell:
// failing is 1 until it is back, nothing counts as acknowledged, resent
// counts only what was sent before (not the refused attempts), and every
// entry arrives, also after a restart of the Deliverer.
func TestResendWindow(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, 30)
	sink := newLossySink(time.Hour)
	d := &export.Deliverer{Name: "syslog", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink,
		Batch: 7, Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	stop := runDeliverer(t, d)
	waitFor(t, "30 entries sent", func() bool { return d.Status().SentTo == 30 })
	if st := d.Status(); st.Delivery != "sent_unconfirmed" || st.Acknowledged != 0 || st.SentUnconfirmed != 30 ||
		st.Resent != 0 || st.NextLeaf != 0 || st.ResendWindow != 30 || st.EntriesBehind != 0 || st.Failing {
		t.Errorf("sent, within the window: %+v", st)
	}

	sink.kill(1)
	l.Append(t, 5) // written blind into the dead connection
	waitFor(t, "failing", func() bool { return d.Status().Failing })
	dials := sink.dialed()
	waitFor(t, "three refused connections", func() bool { return sink.dialed() >= dials+3 })
	if st := d.Status(); !st.Failing || st.SentUnconfirmed != 35 || st.Resent != 0 || st.Acknowledged != 0 {
		t.Errorf("while the receiver is down: %+v", st)
	}

	sink.setUp()
	waitFor(t, "every entry at the receiver", func() bool { return sink.take(l.Hashes) == 35 })
	waitFor(t, "the window sent again", func() bool { return d.Status().Resent == 35 })
	if st := d.Status(); st.Failing || st.SentUnconfirmed != 35 || st.Acknowledged != 0 || st.NextLeaf != 0 || st.SentTo != 35 {
		t.Errorf("after the receiver came back: %+v", st)
	}
	stop()

	// A restart sends the whole window again.
	sink2 := newLossySink(time.Hour)
	d2 := &export.Deliverer{Name: "syslog", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink2, Poll: 5 * time.Millisecond}
	runDeliverer(t, d2)
	waitFor(t, "every entry after the restart", func() bool { return sink2.take(l.Hashes) == 35 })
	waitFor(t, "the window counted", func() bool { return d2.Status().Resent == 70 })
	if st := d2.Status(); st.SentUnconfirmed != 35 || st.Acknowledged != 0 {
		t.Errorf("after the restart: %+v", st)
	}
}

// The window is bounded: with resend_window 0 a batch leaves it at the
// next check that finds the connection open, and with ResendMax the
// oldest leave past that many entries; what left it is lost with the
// receiver and counted as sent_unconfirmed, never as resent or
// acknowledged.
func TestResendWindowBounds(t *testing.T) {
	t.Parallel()
	t.Run("time", func(t *testing.T) {
		t.Parallel()
		l := exporttest.New(t)
		l.Append(t, 20)
		sink := newLossySink(0)
		d := &export.Deliverer{Name: "syslog", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink,
			Batch: 7, Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
		runDeliverer(t, d)
		waitFor(t, "the window empty", func() bool { st := d.Status(); return st.NextLeaf == 20 && st.ResendWindow == 0 })
		sink.kill(0)
		sink.setUp()
		l.Append(t, 3)
		waitFor(t, "the new entries", func() bool { return d.Status().SentTo == 23 && d.Status().NextLeaf == 23 })
		if got := sink.take(l.Hashes); got != 3 {
			t.Errorf("the receiver holds %d entries, want the 3 sent after its restart", got)
		}
		if st := d.Status(); st.SentUnconfirmed != 23 || st.Resent != 0 || st.Acknowledged != 0 {
			t.Errorf("counters: %+v", st)
		}
	})
	t.Run("count", func(t *testing.T) {
		t.Parallel()
		l := exporttest.New(t)
		l.Append(t, 30)
		sink := newLossySink(time.Hour)
		d := &export.Deliverer{Name: "syslog", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink,
			Batch: 7, ResendMax: 10, Poll: 5 * time.Millisecond}
		runDeliverer(t, d)
		waitFor(t, "30 entries sent", func() bool { return d.Status().SentTo == 30 })
		if st := d.Status(); st.ResendWindow > 10 || st.NextLeaf != 21 {
			t.Errorf("window of at most 10: %+v", st)
		}
	})
}
