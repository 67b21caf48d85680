package exportsink_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

const hecToken = "5f1d9c0e-hec-token-never-logged"

// lockedBuffer is a log destination the delivery loop and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deliverHEC runs a Deliverer for the HEC sink URL over l, logging to
// log. Its Send timeout is well above the sink's ack_timeout, so a lost
// acknowledgement fails by the sink's bound.
func deliverHEC(t *testing.T, l *exporttest.Ledger, url string, log *lockedBuffer) *export.Deliverer {
	t.Helper()
	c, err := exportsink.Parse("splunk", url, "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	d := &export.Deliverer{Name: "splunk", Store: l, Sink: sink, Encoder: export.Encoder{Format: c.Format, Options: c.Options, Origin: "test.example/log"},
		Batch: 16, Poll: 10 * time.Millisecond, Timeout: 30 * time.Second, MaxBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// indexedHashes are the entry hashes of what h indexed.
func indexedHashes(t *testing.T, h *hecIndexer) func() []string {
	return func() []string {
		var out []string
		for _, e := range h.events() {
			out = append(out, hashOf(t, string(e.Event)))
		}
		return out
	}
}

func TestHECSink(t *testing.T) {
	t.Parallel()
	h := newHECIndexer(t, map[string]bool{hecToken: true})
	l := exporttest.New(t)
	l.Append(t, 40)
	var log lockedBuffer
	before := time.Now()
	d := deliverHEC(t, l, h.url(hecToken, "index=audit"), &log)
	seen := waitAll(t, l, "HEC", indexedHashes(t, h))
	waitFor(t, "the cursor after the last acknowledgement", func() bool { return d.Status().NextLeaf == 40 })

	// 40 entries, 8 denies with a second (finding) event, each once.
	if n := len(h.events()); n != 48 {
		t.Errorf("%d events indexed for 40 entries and 8 findings", n)
	}
	for hash, n := range seen {
		if n != 2 && n != 1 {
			t.Errorf("entry %s indexed %d times", hash, n)
		}
	}
	for _, e := range h.events()[:1] {
		sec, err := strconv.ParseFloat(string(e.Time), 64)
		if err != nil || e.Source != "acsledger" || e.Sourcetype != "acsledger:ocsf" || e.Index != "audit" || e.Host == "" {
			t.Errorf("first event's fields: %+v", e)
		}
		if at := time.Unix(int64(sec), 0); at.Before(before.Add(-time.Hour)) || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("time %s is not when the ledger committed the entry", e.Time)
		}
	}
	h.mu.Lock()
	channels, auths := len(h.seenChannels), h.seenAuth
	h.mu.Unlock()
	if channels != 1 || len(auths) != 1 || !auths["Splunk "+hecToken] {
		t.Errorf("%d channels (want one, kept while nothing fails), Authorization headers %v", channels, auths)
	}
	if st := d.Status(); st.LastError != "" || st.Acknowledged != 40 {
		t.Errorf("after delivery: %+v", st)
	}
	if strings.Contains(log.String(), hecToken) {
		t.Errorf("the log holds the token:\n%s", log.String())
	}
}

// The indexer restarts with posts answered (ackIds given) but not
// indexed: they are lost, their acknowledgements never come, and the sink
// sends the batch again on a new channel after its ack_timeout. Every
// entry ends up indexed, the cursor moved only over acknowledged ones.
func TestHECSinkAcrossIndexerRestart(t *testing.T) {
	t.Parallel()
	h := newHECIndexer(t, map[string]bool{hecToken: true})
	l := exporttest.New(t)
	l.Append(t, 20)
	var log lockedBuffer
	d := deliverHEC(t, l, h.url(hecToken, "ack_timeout=1s"), &log)
	waitAll(t, l, "HEC before the restart", indexedHashes(t, h))
	waitFor(t, "the cursor at 20", func() bool { return d.Status().NextLeaf == 20 })

	for round := range 3 {
		h.setHold(true)
		l.Append(t, 30)
		waitFor(t, "a post answered and not indexed", func() bool { return h.pendingPosts() > 0 })
		if st := d.Status(); st.NextLeaf >= uint64(len(l.Hashes)) {
			t.Fatalf("round %d: the cursor moved over entries the indexer has not indexed: %+v", round, st)
		}
		h.restart()
		h.setHold(false)
		waitAll(t, l, "HEC after a restart", indexedHashes(t, h))
		waitFor(t, "the cursor at the end", func() bool { return d.Status().NextLeaf == uint64(len(l.Hashes)) })
	}
	st := d.Status()
	if n := strings.Count(log.String(), "no indexer acknowledgement for ackIds"); n < 3 {
		t.Errorf("%d lost acknowledgements logged for 3 restarts:\n%s", n, log.String())
	}
	if st.Acknowledged != int64(len(l.Hashes)) {
		t.Errorf("delivered %d of %d", st.Acknowledged, len(l.Hashes))
	}
	h.mu.Lock()
	channels := len(h.seenChannels)
	h.mu.Unlock()
	if channels < 4 {
		t.Errorf("%d channels for 3 failures: a new one after each", channels)
	}
	if strings.Contains(log.String(), hecToken) || strings.Contains(st.LastError, hecToken) {
		t.Errorf("the token was logged:\n%s", log.String())
	}
	t.Logf("%d events indexed for %d entries; last error: %s", len(h.events()), len(l.Hashes), st.LastError)
}

// A busy indexer (503, code 9) holds delivery back until it is not; the
// refusals say what HEC said, with its code, and never the token.
func TestHECSinkRefusals(t *testing.T) {
	t.Parallel()
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		h := newHECIndexer(t, map[string]bool{hecToken: true})
		h.setBusy(true)
		l := exporttest.New(t)
		l.Append(t, 10)
		var log lockedBuffer
		d := deliverHEC(t, l, h.url(hecToken, ""), &log)
		waitFor(t, "a busy error", func() bool { return strings.Contains(d.Status().LastError, "code 9") })
		if st := d.Status(); st.Acknowledged != 0 || !strings.Contains(st.LastError, "HEC is busy") || !strings.Contains(st.LastError, "HTTP 503") {
			t.Errorf("while busy: %+v", st)
		}
		h.setBusy(false)
		waitAll(t, l, "HEC after busy", indexedHashes(t, h))
		if strings.Contains(log.String(), hecToken) {
			t.Errorf("the log holds the token")
		}
	})
	for _, tc := range []struct{ name, token, params, want string }{
		{"wrong token", "not-" + hecToken, "", "HTTP 403, code 4: Invalid token"},
		{"wrong index", hecToken, "index=nope", "HTTP 400, code 7: Incorrect index), event 0 of the post"},
		{"ack off", "no-ack-" + hecToken, "", "indexer acknowledgement is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHECIndexer(t, map[string]bool{hecToken: true, "no-ack-" + hecToken: false})
			l := exporttest.New(t)
			l.Append(t, 5)
			var log lockedBuffer
			d := deliverHEC(t, l, h.url(tc.token, tc.params), &log)
			waitFor(t, tc.want, func() bool { return strings.Contains(d.Status().LastError, tc.want) })
			st := d.Status()
			if st.Acknowledged != 0 || st.NextLeaf != 0 {
				t.Errorf("a refused batch counted delivered: %+v", st)
			}
			if strings.Contains(st.LastError, hecToken) || strings.Contains(log.String(), hecToken) {
				t.Errorf("the token shows: %s\n%s", st.LastError, log.String())
			}
		})
	}
}

// A batch bigger than one post is cut into several, each with its own
// ackId, and counts only once all of them are acknowledged. A busy
// indexer's refusals of a batch's first post are not counted as re-sends.
func TestHECSinkSplitsBatches(t *testing.T) {
	t.Parallel()
	h := newHECIndexer(t, map[string]bool{hecToken: true})
	l := exporttest.New(t)
	l.Append(t, 900)
	c, err := exportsink.Parse("splunk", h.url(hecToken, ""), "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	d := &export.Deliverer{Name: "splunk", Store: l, Sink: sink, Encoder: export.Encoder{Format: c.Format, Origin: "test.example/log"},
		Batch: 1000, Poll: 10 * time.Millisecond, Timeout: 30 * time.Second, MaxBackoff: 50 * time.Millisecond}
	h.setBusy(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "three busy answers", func() bool { return strings.Contains(d.Status().LastError, "busy") })
	h.setBusy(false)
	seen := waitAll(t, l, "HEC, a batch of 900 entries", indexedHashes(t, h))
	waitFor(t, "the cursor at 900", func() bool { return d.Status().NextLeaf == 900 })
	h.mu.Lock()
	posts := h.posts
	h.mu.Unlock()
	// 900 entries, 180 denies with a second (finding) event, each once.
	st := d.Status()
	if posts < 2 || len(seen) != 900 || len(h.events()) != 1080 || st.Acknowledged != 900 || st.Resent != 0 {
		t.Errorf("%d posts, %d entries in %d events indexed; status %+v", posts, len(seen), len(h.events()), st)
	}
}
