package exportsink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hecIndexer is a loopback Splunk HTTP Event Collector with indexer
// acknowledgement, written from Splunk's documentation ("Format events
// for HTTP Event Collector", "About HTTP Event Collector Indexer
// Acknowledgment", the HEC status codes): POST /services/collector/event
// takes concatenated event objects on a channel (X-Splunk-Request-Channel
// or ?channel=) and answers an ackId, numbered per channel from 0; an
// indexer goroutine indexes received posts asynchronously; POST
// /services/collector/ack {"acks":[...]} answers which ackIds are
// indexed, and forgets an ackId once it reported it true. A restart loses
// what was received and not indexed, and every channel with its ackIds;
// what was indexed stays (it is on disk).
type hecIndexer struct {
	t    testing.TB
	addr string
	// tokens maps a valid token to whether acknowledgement is on for it.
	tokens  map[string]bool
	indexes map[string]bool

	mu   sync.Mutex
	srv  *http.Server
	stop chan struct{}
	done chan struct{}
	wake chan struct{}
	busy bool // answer 503, code 9
	hold bool // receive but do not index
	// countOnly: count indexed events, do not keep them (benchmarks)
	countOnly bool
	nIndexed  int
	channels  map[string]*hecChannel
	pending   []hecPost
	indexed   []hecIndexed
	// seen records every request's channel and Authorization header.
	seenChannels map[string]bool
	seenAuth     map[string]bool
	posts        int
}

type hecChannel struct {
	next  uint64
	acked map[uint64]bool // false: received, not indexed yet
}

type hecPost struct {
	channel string
	ackID   uint64
	events  []hecIndexed
}

// hecIndexed is one indexed event as HEC's /event endpoint takes it.
type hecIndexed struct {
	Time       json.Number     `json:"time"`
	Host       string          `json:"host"`
	Source     string          `json:"source"`
	Sourcetype string          `json:"sourcetype"`
	Index      string          `json:"index"`
	Event      json.RawMessage `json:"event"`
}

var guidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func newHECIndexer(t testing.TB, tokens map[string]bool) *hecIndexer {
	h := &hecIndexer{t: t, tokens: tokens, indexes: map[string]bool{"main": true, "audit": true},
		seenChannels: map[string]bool{}, seenAuth: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.start(ln)
	t.Cleanup(h.shutdown)
	return h
}

func (h *hecIndexer) start(ln net.Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.channels = map[string]*hecChannel{}
	h.pending = nil
	h.stop, h.done, h.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/services/collector/event", h.event)
	mux.HandleFunc("/services/collector/ack", h.ack)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv := h.srv
	go srv.Serve(ln)
	go h.index(h.stop, h.done, h.wake)
}

// shutdown stops the server and the indexer, dropping what was not
// indexed.
func (h *hecIndexer) shutdown() {
	h.mu.Lock()
	srv, stop, done := h.srv, h.stop, h.done
	h.mu.Unlock()
	srv.Close()
	close(stop)
	<-done
	h.mu.Lock()
	h.pending, h.channels = nil, map[string]*hecChannel{}
	h.mu.Unlock()
}

// restart is a crash and start of the indexer on the same port: posts
// not yet indexed are lost, and so is every channel's ack state.
func (h *hecIndexer) restart() {
	h.shutdown()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ln, err = net.Listen("tcp", h.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatalf("restarting the HEC indexer on %s: %v", h.addr, err)
	}
	h.start(ln)
}

// index moves received posts to the index, as Splunk's pipeline does
// after the answer was sent, unless held.
func (h *hecIndexer) index(stop, done, wake chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-wake:
		}
		h.mu.Lock()
		if !h.hold {
			for _, p := range h.pending {
				h.nIndexed += len(p.events)
				if !h.countOnly {
					h.indexed = append(h.indexed, p.events...)
				}
				if ch := h.channels[p.channel]; ch != nil {
					ch.acked[p.ackID] = true
				}
			}
			h.pending = nil
		}
		h.mu.Unlock()
	}
}

func (h *hecIndexer) poke() {
	h.mu.Lock()
	w := h.wake
	h.mu.Unlock()
	select {
	case w <- struct{}{}:
	default:
	}
}

func (h *hecIndexer) setBusy(b bool) {
	h.mu.Lock()
	h.busy = b
	h.mu.Unlock()
}

func (h *hecIndexer) setHold(b bool) {
	h.mu.Lock()
	h.hold = b
	h.mu.Unlock()
	h.poke()
}

// pendingPosts is how many posts were answered an ackId and not indexed.
func (h *hecIndexer) pendingPosts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)
}

func (h *hecIndexer) events() []hecIndexed {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hecIndexed(nil), h.indexed...)
}

// answer writes HEC's JSON status answer.
func answer(w http.ResponseWriter, status, code int, text string, extra ...any) {
	m := map[string]any{"text": text, "code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(m)
}

// admit checks what every endpoint checks: the method, the token and
// the channel. It returns the token's ack setting and the channel.
func (h *hecIndexer) admit(w http.ResponseWriter, r *http.Request) (ack bool, channel string, ok bool) {
	if r.Method != http.MethodPost {
		answer(w, http.StatusMethodNotAllowed, 8, "Method not allowed")
		return false, "", false
	}
	auth := r.Header.Get("Authorization")
	h.mu.Lock()
	h.seenAuth[auth] = true
	busy := h.busy
	h.mu.Unlock()
	token, isSplunk := strings.CutPrefix(auth, "Splunk ")
	switch ackOn, known := h.tokens[token]; {
	case auth == "":
		answer(w, http.StatusUnauthorized, 2, "Token is required")
		return false, "", false
	case !isSplunk:
		answer(w, http.StatusUnauthorized, 3, "Invalid authorization")
		return false, "", false
	case !known:
		answer(w, http.StatusForbidden, 4, "Invalid token")
		return false, "", false
	default:
		ack = ackOn
	}
	channel = r.Header.Get("X-Splunk-Request-Channel")
	if channel == "" {
		channel = r.URL.Query().Get("channel")
	}
	h.mu.Lock()
	h.seenChannels[channel] = true
	h.mu.Unlock()
	switch {
	case ack && channel == "":
		answer(w, http.StatusBadRequest, 10, "Data channel is missing")
		return false, "", false
	case channel != "" && !guidRE.MatchString(channel):
		answer(w, http.StatusBadRequest, 11, "Invalid data channel")
		return false, "", false
	case busy:
		answer(w, http.StatusServiceUnavailable, 9, "Server is busy")
		return false, "", false
	}
	return ack, channel, true
}

func (h *hecIndexer) event(w http.ResponseWriter, r *http.Request) {
	ack, channel, ok := h.admit(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		return
	}
	if len(body) > 1<<20 {
		answer(w, http.StatusRequestEntityTooLarge, 6, "Invalid data format")
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var evs []hecIndexed
	for n := 0; ; n++ {
		var e hecIndexed
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			answer(w, http.StatusBadRequest, 6, "Invalid data format", "invalid-event-number", n)
			return
		}
		switch s := strings.TrimSpace(string(e.Event)); {
		case e.Event == nil:
			answer(w, http.StatusBadRequest, 12, "Event field is required", "invalid-event-number", n)
			return
		case s == `""` || s == "null":
			answer(w, http.StatusBadRequest, 13, "Event field cannot be blank", "invalid-event-number", n)
			return
		}
		if e.Index != "" && !h.indexes[e.Index] {
			answer(w, http.StatusBadRequest, 7, "Incorrect index", "invalid-event-number", n)
			return
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		answer(w, http.StatusBadRequest, 5, "No data")
		return
	}
	h.mu.Lock()
	h.posts++
	if !ack {
		// Without acknowledgement HEC answers at once; index now.
		h.indexed = append(h.indexed, evs...)
		h.mu.Unlock()
		answer(w, http.StatusOK, 0, "Success")
		return
	}
	ch := h.channels[channel]
	if ch == nil {
		ch = &hecChannel{acked: map[uint64]bool{}}
		h.channels[channel] = ch
	}
	id := ch.next
	ch.next++
	ch.acked[id] = false
	h.pending = append(h.pending, hecPost{channel: channel, ackID: id, events: evs})
	h.mu.Unlock()
	h.poke()
	answer(w, http.StatusOK, 0, "Success", "ackId", id)
}

func (h *hecIndexer) ack(w http.ResponseWriter, r *http.Request) {
	ack, channel, ok := h.admit(w, r)
	if !ok {
		return
	}
	if !ack {
		answer(w, http.StatusBadRequest, 14, "ACK is disabled")
		return
	}
	var q struct {
		Acks []uint64 `json:"acks"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&q); err != nil || q.Acks == nil {
		answer(w, http.StatusBadRequest, 6, "Invalid data format")
		return
	}
	out := map[string]bool{}
	h.mu.Lock()
	ch := h.channels[channel]
	for _, id := range q.Acks {
		done := ch != nil && ch.acked[id]
		if done {
			delete(ch.acked, id) // reported once, then released
		}
		out[strconv.FormatUint(id, 10)] = done
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"acks": out})
}

// url is the sink URL for this indexer.
func (h *hecIndexer) url(token, params string) string {
	u := fmt.Sprintf("hec+http://%s?token=%s", h.addr, token)
	if params != "" {
		u += "&" + params
	}
	return u
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
