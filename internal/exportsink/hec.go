package exportsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger/export"
)

// Splunk's HTTP Event Collector with indexer acknowledgement (Splunk
// Enterprise, "About HTTP Event Collector Indexer Acknowledgment"): each
// post to /services/collector/event on a channel answers an ackId, and
// POST /services/collector/ack {"acks":[ids]} on the same channel says
// which of them the indexer has indexed. Send returns nil only when every
// post of its batch is acknowledged, so the cursor moves only over
// indexed events.

// hecParams are the query parameters of hec+https and hec+http.
var hecParams = []string{"token", "index", "sourcetype", "ack_timeout"}

// hecConfig is a hec sink's settings from its URL.
type hecConfig struct {
	token      string
	index      string // "" is the token's default index
	sourcetype string
	// ackTimeout bounds the wait for the acknowledgements of one batch
	// after its last post.
	ackTimeout time.Duration
}

const (
	hecDefaultAckTimeout = 20 * time.Second
	// hecMaxPost is the most bytes of events in one post (Splunk's
	// max_content_length was 1 MB before 8.x); a bigger event goes alone.
	hecMaxPost = 512 << 10
	hecSource  = "acsledger"
)

// Splunk index names: lowercase letters, digits, '_' and '-', not
// starting with '_' or '-' (indexes.conf).
var hecIndexRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,79}$`)

// parseHEC takes the hec schemes' parameters: token (required), index,
// sourcetype and ack_timeout. hec+http sends the token in clear, so it
// is taken only to a loopback address (tests, a forwarder on the host).
func (c *Config) parseHEC(u *url.URL, q url.Values) error {
	h := hecConfig{token: q.Get("token"), index: q.Get("index"), sourcetype: q.Get("sourcetype"), ackTimeout: hecDefaultAckTimeout}
	if h.token == "" {
		return errors.New("token is required (the HEC token, with indexer acknowledgement on)")
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("%s takes no path: the sink posts to /services/collector/event and /services/collector/ack", c.Kind)
	}
	if h.index != "" && !hecIndexRE.MatchString(h.index) {
		return fmt.Errorf("index=%q: want a Splunk index name (lowercase letters, digits, '_' and '-')", h.index)
	}
	if h.sourcetype == "" {
		h.sourcetype = "acsledger:" + string(c.Format)
	} else if len(h.sourcetype) > 100 || strings.ContainsFunc(h.sourcetype, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("sourcetype=%q: want at most 100 characters, no spaces or control characters", h.sourcetype)
	}
	if v := q.Get("ack_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 10*time.Minute {
			return fmt.Errorf("ack_timeout=%q: want a duration from 1s to 10m", v)
		}
		h.ackTimeout = d
	}
	if c.Kind == "hec+http" && !isLoopback(u.Hostname()) {
		return errors.New("hec+http sends the token in clear and is taken only to a loopback address (use hec+https)")
	}
	c.hec = h
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hecSink posts each batch as concatenated HEC event objects and polls
// for their indexer acknowledgements. The token goes only in the
// Authorization header and is never logged; the channel is a random UUID
// renewed after every failure, so that an ackId of a channel an indexer
// restart forgot (ackIds start again at 0) is never taken for one of the
// batch sent again.
type hecSink struct {
	c          Config
	event, ack string
	auth       string
	// meta is each event object's members between time and event.
	meta    []byte
	channel string
	client  *http.Client
}

func newHEC(c Config) (*hecSink, error) {
	base := url.URL{Scheme: "https", Host: c.url.Host}
	if c.Kind == "hec+http" {
		base.Scheme = "http"
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("export sink %s: couldn't read the host name for the HEC host field: %w", c.Name, err)
	}
	meta := fmt.Appendf(nil, `,"host":%s,"source":%s,"sourcetype":%s`, jsonString(host), jsonString(hecSource), jsonString(c.hec.sourcetype))
	if c.hec.index != "" {
		meta = fmt.Appendf(meta, `,"index":%s`, jsonString(c.hec.index))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c.tls
	s := &hecSink{
		c:      c,
		event:  base.JoinPath("/services/collector/event").String(),
		ack:    base.JoinPath("/services/collector/ack").String(),
		auth:   "Splunk " + c.hec.token,
		meta:   meta,
		client: &http.Client{Transport: tr},
	}
	s.renew()
	return s, nil
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// renew starts a new channel, on new connections: a failure may mean the
// indexer restarted, closing the ones kept alive.
func (s *hecSink) renew() {
	s.channel = acs.NewUUID()
	s.client.CloseIdleConnections()
}

func (s *hecSink) Send(ctx context.Context, batch []export.Event) error {
	var ids []uint64
	for start := 0; start < len(batch); {
		// A new body for each post: the HTTP transport may still read a
		// request's body after Do returned an error.
		var body []byte
		for start < len(batch) && (len(body) == 0 || len(body)+len(batch[start].JSON) < hecMaxPost) {
			body = s.appendEvent(body, batch[start])
			start++
		}
		id, err := s.post(ctx, body)
		if err != nil {
			s.renew()
			var he *hecError
			if len(ids) == 0 && errors.As(err, &he) {
				// HEC refused the first post whole: it holds nothing of
				// the batch, and sending it again is not a re-send.
				return notSent{err}
			}
			return err
		}
		ids = append(ids, id)
	}
	if err := s.awaitAcks(ctx, ids); err != nil {
		s.renew()
		return err
	}
	return nil
}

// appendEvent writes e as one HEC event object: time (when the ledger
// committed the entry, epoch seconds with milliseconds), host, source,
// sourcetype, index, and the event JSON as event.
func (s *hecSink) appendEvent(b []byte, e export.Event) []byte {
	b = append(b, `{"time":`...)
	ms := e.RecordedAt.UnixMilli()
	b = strconv.AppendInt(b, ms/1000, 10)
	b = append(b, '.')
	b = append(b, byte('0'+ms%1000/100), byte('0'+ms%100/10), byte('0'+ms%10))
	b = append(b, s.meta...)
	b = append(b, `,"event":`...)
	b = append(b, e.JSON...)
	return append(b, "}\n"...)
}

// hecReply is HEC's answer to a post.
type hecReply struct {
	Text         string  `json:"text"`
	Code         *int    `json:"code"`
	AckID        *uint64 `json:"ackId"`
	InvalidEvent *int    `json:"invalid-event-number"`
}

// post sends body and returns its ackId.
func (s *hecSink) post(ctx context.Context, body []byte) (uint64, error) {
	status, raw, err := s.do(ctx, s.event, body)
	if err != nil {
		return 0, err
	}
	var r hecReply
	jerr := json.Unmarshal(raw, &r)
	if status/100 != 2 {
		return 0, s.refused("event", status, r)
	}
	switch {
	case jerr != nil:
		return 0, fmt.Errorf("export sink %s: HEC answered a post with HTTP %d and no JSON", s.c.Name, status)
	case r.AckID == nil:
		return 0, fmt.Errorf("export sink %s: HEC answered without an ackId: indexer acknowledgement is off for this token; turn it on (useACK), the sink counts events delivered only when the indexer acknowledges them", s.c.Name)
	}
	return *r.AckID, nil
}

// do POSTs body to target on the sink's channel and returns the status
// and up to 64 KiB of the answer.
func (s *hecSink) do(ctx context.Context, target string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("export sink %s: %w", s.c.Name, err)
	}
	req.Header.Set("Authorization", s.auth)
	req.Header.Set("X-Splunk-Request-Channel", s.channel)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("export sink %s: POST %s to %s: %w", s.c.Name, req.URL.Path, s.c.Redacted, unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, fmt.Errorf("export sink %s: POST %s to %s: reading the answer: %w", s.c.Name, req.URL.Path, s.c.Redacted, err)
	}
	return resp.StatusCode, raw, nil
}

// notSent marks an error after which the receiver holds nothing of the
// batch (export.ErrNotSent); its message is err's.
type notSent struct{ err error }

func (e notSent) Error() string   { return e.err.Error() }
func (e notSent) Unwrap() []error { return []error{e.err, export.ErrNotSent} }

// hecError is a refusal by HEC: its HTTP status and HEC status code.
type hecError struct {
	msg    string
	status int
}

func (e *hecError) Error() string { return e.msg }

// permanent says whether polling again cannot help: the token, the
// channel or the request is refused (4xx), not the indexer busy.
func (e *hecError) permanent() bool {
	return e.status/100 == 4 && e.status != http.StatusTooManyRequests
}

func (s *hecSink) refused(endpoint string, status int, r hecReply) error {
	code := "no code"
	if r.Code != nil {
		code = "code " + strconv.Itoa(*r.Code)
	}
	text := s.clean(r.Text)
	if text == "" {
		text = http.StatusText(status)
	}
	what := "refused"
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		what = "is busy"
	}
	msg := fmt.Sprintf("export sink %s: HEC %s (/services/collector/%s: HTTP %d, %s: %s)", s.c.Name, what, endpoint, status, code, text)
	if r.InvalidEvent != nil {
		msg += fmt.Sprintf(", event %d of the post", *r.InvalidEvent)
	}
	return &hecError{msg: msg, status: status}
}

// clean makes HEC's text fit for a log line: short, printable, and
// without the token should a proxy echo it.
func (s *hecSink) clean(text string) string {
	text = strings.ReplaceAll(text, s.c.hec.token, masked)
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, text)
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	return text
}

// awaitAcks polls /services/collector/ack until every id is
// acknowledged, ctx ends or the sink's ack_timeout passes: an indexer
// that restarted lost what it had not indexed, and answers false for ever
// after, so a batch not acknowledged in time fails and is sent again.
func (s *hecSink) awaitAcks(ctx context.Context, ids []uint64) error {
	deadline := time.Now().Add(s.c.hec.ackTimeout)
	wait := 20 * time.Millisecond
	var lastErr error
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("export sink %s: waiting for the indexer to acknowledge %d posts: %w", s.c.Name, len(ids), ctx.Err())
		case <-t.C:
		}
		acked, err := s.queryAcks(ctx, ids)
		var he *hecError
		switch {
		case errors.As(err, &he) && he.permanent():
			return err
		case err != nil:
			lastErr = err
		default:
			ids = slices.DeleteFunc(ids, func(id uint64) bool { return acked[strconv.FormatUint(id, 10)] })
			if len(ids) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("export sink %s: no indexer acknowledgement for ackIds %v within %v (an indexer restart loses what it had not indexed): the batch is sent again on a new channel", s.c.Name, ids, s.c.hec.ackTimeout)
			if lastErr != nil {
				msg += "; last poll: " + lastErr.Error()
			}
			return errors.New(msg)
		}
		wait = min(2*wait, time.Second)
	}
}

// queryAcks asks which of ids are indexed.
func (s *hecSink) queryAcks(ctx context.Context, ids []uint64) (map[string]bool, error) {
	body, _ := json.Marshal(struct {
		Acks []uint64 `json:"acks"`
	}{ids})
	status, raw, err := s.do(ctx, s.ack, body)
	if err != nil {
		return nil, err
	}
	var r struct {
		hecReply
		Acks map[string]bool `json:"acks"`
	}
	jerr := json.Unmarshal(raw, &r)
	if status/100 != 2 {
		return nil, s.refused("ack", status, r.hecReply)
	}
	if jerr != nil || r.Acks == nil {
		return nil, fmt.Errorf("export sink %s: HEC answered an ack query with HTTP %d and no acks", s.c.Name, status)
	}
	return r.Acks, nil
}

func (s *hecSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
