package guardian_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
)

// TestPing: system/ping is always allowed, needs no signature, no handshake
// and no fresh timestamp, never gets an ACS error and is never chained
// (ACS §13).
func TestPing(t *testing.T) {
	e := newErrEnv(t, nil, false)
	stale := func(p map[string]any) { p["timestamp"] = t0.Add(-24 * time.Hour).Format(time.RFC3339) }
	fixedID := func(p map[string]any) { p["request_id"] = "11111111-2222-4333-8444-555555555555" }
	badSig := func(p map[string]any) {
		p["signature"] = map[string]any{"algorithm": "HMAC-SHA256", "key_id": "nobody", "value": "AAAA"}
	}
	rows := []struct {
		name string
		body func() []byte
	}{
		{"no handshake, unsigned", func() []byte { return e.a.envelope(t, guardian.MethodPing, map[string]any{}, nil) }},
		{"signed", func() []byte { return e.a.envelope(t, guardian.MethodPing, map[string]any{"echo": "x"}, nil) }},
		{"bad signature", func() []byte {
			return (&agent{sessionID: e.a.sessionID, agentID: "a", now: e.a.now}).envelope(t, guardian.MethodPing, map[string]any{}, badSig)
		}},
		{"stale timestamp", func() []byte { return e.a.envelope(t, guardian.MethodPing, map[string]any{}, stale) }},
		{"replayed request_id 1", func() []byte { return e.a.envelope(t, guardian.MethodPing, map[string]any{}, fixedID) }},
		{"replayed request_id 2", func() []byte { return e.a.envelope(t, guardian.MethodPing, map[string]any{}, fixedID) }},
		{"incompatible acs_version", func() []byte {
			return e.a.envelope(t, guardian.MethodPing, map[string]any{}, func(p map[string]any) { p["acs_version"] = "9.0.0" })
		}},
	}
	for _, r := range rows {
		got := decode(t, e.tp.send(t, r.body()))
		if got.decision() != "allow" || got.Error != nil {
			t.Errorf("%s: %s", r.name, got.raw)
		}
	}
	if _, err := e.s.store.Session(t.Context(), e.a.sessionID); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("ping created a session in the ledger: %v", err)
	}
	// After the handshake too, pings leave the chain alone.
	e.a.shakeHands(t, e.tp)
	step := decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", map[string]any{}, nil)))
	for range 3 {
		p := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPing, map[string]any{"echo": "y"}, nil)))
		hmacChecker(t, e.a.sessionID, p.raw)
	}
	sess, err := e.s.store.Session(t.Context(), e.a.sessionID)
	if err != nil || sess.Length != 1 || sess.Head.String() != step.str("chain_hash") {
		t.Fatalf("after pings: session %+v, %v", sess, err)
	}
	// A ping whose payload is wrong still gets a JSON-RPC error, never ACS.
	r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodPing, map[string]any{"echo": 5}, nil)))
	mustError(t, r, -32602, "invalid_params", "params.payload.echo must be a string")
}

// TestBatch: an array of requests gets an array of correlated answers, each
// evaluated independently in order (ACS §3), over HTTP and stdio.
func TestBatch(t *testing.T) {
	for _, name := range []string{"http", "stdio"} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t, "sqlite", nil)
			var tp transport = newHTTP(t, s.g)
			if name == "stdio" {
				tp = newStdio(t, s.g)
			}
			a := newAgent(t, mustKeys(t).hmac, s.clock.Now)
			hello := a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)           // id 1
			start := a.envelope(t, "steps/sessionStart", map[string]any{}, nil)          // id 2
			nope := a.envelope(t, "steps/nope", map[string]any{}, nil)                   // id 3
			dup := a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)    // id 4
			ping := a.envelope(t, guardian.MethodPing, map[string]any{"echo": "b"}, nil) // id 5
			parts := [][]byte{hello, start, []byte(`42`), nope, dup, dup, ping}
			body := append([]byte("["), bytes.Join(parts, []byte(","))...)
			body = append(body, ']')
			var answers []json.RawMessage
			if err := json.Unmarshal(tp.send(t, body), &answers); err != nil {
				t.Fatalf("batch answer is not an array: %v", err)
			}
			if len(answers) != len(parts) {
				t.Fatalf("%d answers for %d requests", len(answers), len(parts))
			}
			want := []struct {
				id   string
				code int
				dec  string
			}{{"1", 0, ""}, {"2", 0, "allow"}, {"null", -32600, ""}, {"3", -32601, ""}, {"4", 0, "allow"}, {"4", -32005, ""}, {"5", 0, "allow"}}
			for i, w := range want {
				r := decode(t, answers[i])
				if string(r.ID) != w.id {
					t.Errorf("answer %d has id %s, want %s", i, r.ID, w.id)
				}
				switch {
				case w.code != 0 && (r.Error == nil || r.Error.Code != w.code):
					t.Errorf("answer %d: want error %d: %s", i, w.code, r.raw)
				case w.code == 0 && r.Error != nil:
					t.Errorf("answer %d: unexpected error: %s", i, r.raw)
				case w.dec != "" && r.decision() != w.dec:
					t.Errorf("answer %d: decision %q, want %q", i, r.decision(), w.dec)
				}
			}
		})
	}
}

// TestConcurrentSessions: concurrent requests of one session are serialized
// (no lost or forked appends), while sessions proceed in parallel.
func TestConcurrentSessions(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		s := newSetup(t, kind, nil)
		tp := newHTTP(t, s.g)
		const sessions, workers, steps = 3, 4, 5
		agents := make([]*agent, sessions)
		for i := range agents {
			agents[i] = newAgent(t, mustKeys(t).hmac, s.clock.Now)
			mustResult(t, decode(t, tp.send(t, agents[i].envelope(t, guardian.MethodHello, agents[i].hello(t, nil), nil))))
		}
		// Bodies are made up front: t.Fatal must stay on this goroutine.
		bodies := make([][][]byte, sessions*workers)
		for i := range bodies {
			a := agents[i%sessions]
			for range steps {
				bodies[i] = append(bodies[i], a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil))
			}
		}
		answers := make([][][]byte, len(bodies))
		errs := make(chan error, len(bodies))
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, b := range bodies[i] {
					resp, err := http.Post(tp.url, "application/json", bytes.NewReader(b))
					if err != nil {
						errs <- err
						return
					}
					ans, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						errs <- err
						return
					}
					answers[i] = append(answers[i], ans)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, as := range answers {
			for _, ans := range as {
				if r := decode(t, ans); r.decision() != "allow" {
					t.Errorf("concurrent step: %s", r.raw)
				}
			}
		}
		for _, a := range agents {
			sess, err := s.store.Session(context.Background(), a.sessionID)
			if err != nil || sess.Length != workers*steps {
				t.Fatalf("session %s: %+v, %v; want %d entries", a.sessionID, sess, err, workers*steps)
			}
			verifyStoredChain(t, s.store, a.sessionID, sess.Head.String())
		}
	})
}

// TestRestart: a Guardian started over an existing ledger continues a
// session's chain from the stored head after a new handshake.
func TestRestart(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { testRestart(t, kind) })
	}
}

func testRestart(t *testing.T, kind string) {
	s := newSetup(t, kind, nil)
	a := newAgent(t, mustKeys(t).hmac, s.clock.Now)
	tp := newHTTP(t, s.g)
	a.shakeHands(t, tp)
	startBody := a.envelope(t, "steps/sessionStart", map[string]any{}, nil)
	first := decode(t, tp.send(t, startBody))

	g2 := s.another(t)
	tp2 := newHTTP(t, g2)
	a.shakeHands(t, tp2)
	// The replay history is the ledger's, so it survives the restart: the
	// new Guardian has no memory of the request, the ledger refuses it.
	mustError(t, decode(t, tp2.send(t, startBody)), -32005, "replay_detected", "has already seen request_id")
	if sess, err := s.store.Session(context.Background(), a.sessionID); err != nil || sess.Length != 1 {
		t.Fatalf("after the replay: %+v, %v; want the one entry", sess, err)
	}
	r := decode(t, tp2.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), withHead(first.str("chain_hash")))))
	if r.decision() != "allow" {
		t.Fatalf("after restart: %s", r.raw)
	}
	entries := verifyStoredChain(t, s.store, a.sessionID, r.str("chain_hash"))
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
}

// TestSessionEnd: after sessionEnd the session's state is gone; a step
// needs a new handshake.
func TestSessionEnd(t *testing.T) {
	e := newErrEnv(t, nil, true)
	mustResult(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionEnd", map[string]any{}, nil))))
	mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))), -32003, "no_handshake", "handshake/hello")
}

func TestSetSigningKeys(t *testing.T) {
	k := mustKeys(t)
	var c guardian.Config
	if err := c.SetSigningKeys([]*sig.PrivateKey{k.hmac, k.ecdsa, k.hybrid}, "guardian-hybrid"); err != nil {
		t.Fatal(err)
	}
	if len(c.HMACKeys) != 1 || c.ResponseKey != k.hybrid {
		t.Fatalf("config %+v", c)
	}
	if err := new(guardian.Config).SetSigningKeys([]*sig.PrivateKey{k.ecdsa, k.hybrid}, ""); err == nil {
		t.Fatal("two asymmetric keys and no name: no error")
	}
	if err := new(guardian.Config).SetSigningKeys([]*sig.PrivateKey{k.ecdsa}, "missing"); err == nil {
		t.Fatal("a missing key name: no error")
	}
}

// TestIdleSessionsForgotten: a session idle past SessionIdle loses its
// in-memory state at the next handshake sweep; after a new handshake its
// chain continues from the ledger.
func TestIdleSessionsForgotten(t *testing.T) {
	e := newErrEnv(t, func(c *guardian.Config) { c.SessionIdle = 10 * time.Minute }, true)
	first := decode(t, e.tp.send(t, e.a.envelope(t, "steps/sessionStart", map[string]any{}, nil)))
	e.s.clock.Set(t0.Add(11 * time.Minute))
	other := newAgent(t, mustKeys(t).hmac, e.s.clock.Now)
	other.shakeHands(t, e.tp)
	mustError(t, decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), nil))), -32003, "no_handshake", "handshake/hello")
	e.a.shakeHands(t, e.tp)
	r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall("x"), withHead(first.str("chain_hash")))))
	if r.decision() != "allow" {
		t.Fatalf("after re-handshake: %s", r.raw)
	}
	verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash"))
}

// TestHTTPPostOnly: the endpoint answers POST only.
func TestHTTPPostOnly(t *testing.T) {
	s := newSetup(t, "sqlite", nil)
	srv := httptest.NewServer(s.g)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("GET: status %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestConcurrentReplay: the same signed request sent many times at once in
// one session, to two Guardians over one ledger (so that neither one's
// memory decides), is chained once; every other copy is REPLAY_DETECTED,
// and none carries a decision.
func TestConcurrentReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		s, tps, a := newReplicas(t, kind)
		a.shakeHands(t, tps[0], tps[1])
		body := a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
		const copies = 6
		answers := make([][]byte, copies)
		errs := make([]error, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(tps[i%2].url, "application/json", bytes.NewReader(body))
				if err != nil {
					errs[i] = err
					return
				}
				defer resp.Body.Close()
				answers[i], errs[i] = io.ReadAll(resp.Body)
			}()
		}
		wg.Wait()
		allowed := 0
		var head string
		for i, ans := range answers {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			r := decode(t, ans)
			if r.Error == nil {
				if r.decision() != "allow" {
					t.Fatalf("copy %d: %s", i, r.raw)
				}
				allowed++
				head = r.str("chain_hash")
				continue
			}
			mustError(t, r, -32005, "replay_detected", "has already seen request_id")
		}
		if allowed != 1 {
			t.Fatalf("%d copies allowed, want exactly 1", allowed)
		}
		if es := verifyStoredChain(t, s.store, a.sessionID, head); len(es) != 1 {
			t.Fatalf("%d entries stored, want 1", len(es))
		}
	})
}

// TestRefusedReplayLeavesNoHistory: a request refused as a replay (its
// nonce was seen) does not make its own request_id seen; the same
// request_id with a fresh nonce is answered, and the ledger holds both
// answered steps and nothing of the refused one. The replay goes to a
// second Guardian over the same ledger, so the ledger refuses it.
func TestRefusedReplayLeavesNoHistory(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		s, tps, a := newReplicas(t, kind)
		tp, tp2 := tps[0], tps[1]
		a.shakeHands(t, tp)
		with := func(requestID, nonce string) func(p map[string]any) {
			return func(p map[string]any) { p["request_id"], p["nonce"] = requestID, nonce }
		}
		first, second := uuid(), uuid()
		if r := decode(t, tp.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), with(first, "nonce-aaaaaaaaaaaaaaaa")))); r.decision() != "allow" {
			t.Fatalf("first: %s", r.raw)
		}
		// The second Guardian takes the session up where the ledger
		// has it (a Guardian that decided against an older head would
		// be refused: TestHeadMovedUnderGuardian).
		a.shakeHands(t, tp2)
		mustError(t, decode(t, tp2.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), with(second, "nonce-aaaaaaaaaaaaaaaa")))),
			-32005, "replay_detected", "or its nonce")
		r := decode(t, tp2.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), with(second, "nonce-bbbbbbbbbbbbbbbb"))))
		if r.decision() != "allow" {
			t.Fatalf("refused request_id with a fresh nonce: %s", r.raw)
		}
		es := verifyStoredChain(t, s.store, a.sessionID, r.str("chain_hash"))
		if len(es) != 2 || es[0].StepID != first || es[1].StepID != second {
			t.Fatalf("stored steps %+v, want %s then %s", es, first, second)
		}
	})
}
