package guardian_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/schemas"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// t0 is the test clock's time; requests are stamped with it.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// openStore opens a real store: "sqlite" (a temporary directory) or
// "postgres" (a throwaway database from pgtest).
func openStore(t *testing.T, kind string) storeopen.Store {
	t.Helper()
	ctx := context.Background()
	var url string
	switch kind {
	case "sqlite":
		url = "sqlite:" + t.TempDir()
	case "postgres":
		url = pgtest.NewDatabase(t)
		if err := storeopen.Migrate(ctx, url); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	default:
		t.Fatalf("unknown store kind %q", kind)
	}
	st, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openStoreB opens a durable SQLite store for a benchmark.
func openStoreB(b *testing.B) storeopen.Store {
	st, err := storeopen.Open(context.Background(), "sqlite:"+b.TempDir(), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

var discard = slog.New(slog.DiscardHandler)

func mustKeySet(tb testing.TB, k testKeys) *sig.KeySet {
	ks, err := sig.NewKeySet(k.hmac.Public(), k.other.Public(), k.agent.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return ks
}

// keys are the test deployment's keys, made once per test binary.
type testKeys struct {
	hmac   *sig.PrivateKey
	ecdsa  *sig.PrivateKey
	hybrid *sig.PrivateKey
	mldsa  *sig.PrivateKey
	agent  *sig.PrivateKey // an ECDSA request key for asymmetric clients
	other  *sig.PrivateKey // an HMAC key the Guardian also trusts
}

var (
	keysOnce sync.Once
	keys     testKeys
)

func mustKeys(t *testing.T) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		ikm := bytes.Repeat([]byte{0x42}, 32)
		if keys.hmac, err = sig.NewHMACKey("agent-hmac-1", ikm); err != nil {
			panic(err)
		}
		if keys.other, err = sig.NewHMACKey("agent-hmac-2", bytes.Repeat([]byte{0x17}, 32)); err != nil {
			panic(err)
		}
		for _, k := range []struct {
			dst **sig.PrivateKey
			alg sig.Algorithm
			id  string
		}{
			{&keys.ecdsa, sig.ECDSAP256, "guardian-ecdsa"},
			{&keys.hybrid, sig.MLDSA65ECDSAP256, "guardian-hybrid"},
			{&keys.mldsa, sig.MLDSA65, "guardian-mldsa"},
			{&keys.agent, sig.ECDSAP256, "agent-ecdsa"},
		} {
			if *k.dst, err = sig.GenerateKey(k.alg, k.id); err != nil {
				panic(err)
			}
		}
	})
	return keys
}

// setup is one Guardian under test with its store and clock.
type setup struct {
	g     *guardian.Guardian
	store storeopen.Store
	clock *clock
	cfg   guardian.Config
}

// newSetup makes a Guardian over a real store. edit may change the config
// before New.
func newSetup(t *testing.T, storeKind string, edit func(*guardian.Config)) *setup {
	t.Helper()
	k := mustKeys(t)
	c := &clock{now: t0}
	st := openStore(t, storeKind)
	ks, err := sig.NewKeySet(k.hmac.Public(), k.other.Public(), k.agent.Public())
	if err != nil {
		t.Fatal(err)
	}
	cfg := guardian.Config{
		Store:       st,
		Policy:      &guardian.TestPolicy{PolicyID: "test-policy", PolicyVersion: "v1"},
		Keys:        ks,
		HMACKeys:    []*sig.PrivateKey{k.hmac, k.other},
		ResponseKey: k.ecdsa,
		Clock:       c.Now,
		Logger:      slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&cfg)
	}
	g, err := guardian.New(cfg)
	if err != nil {
		t.Fatalf("guardian.New: %v", err)
	}
	return &setup{g: g, store: st, clock: c, cfg: cfg}
}

// transport sends one body and returns the answer body.
type transport interface {
	send(t *testing.T, body []byte) []byte
	name() string
}

// httpTransport posts to a real HTTP server on a loopback port.
type httpTransport struct{ url string }

func newHTTP(t *testing.T, g *guardian.Guardian) *httpTransport {
	mux := http.NewServeMux()
	mux.Handle("POST /acs", g)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &httpTransport{url: srv.URL + "/acs"}
}

func (h *httpTransport) name() string { return "http" }

func (h *httpTransport) send(t *testing.T, body []byte) []byte {
	t.Helper()
	resp, err := http.Post(h.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP status %d: %s", resp.StatusCode, b)
	}
	return b
}

// stdioTransport talks Content-Length frames to ServeStdio over pipes.
type stdioTransport struct {
	w    *io.PipeWriter
	r    *bufio.Reader
	done chan error
}

func newStdio(t *testing.T, g *guardian.Guardian) *stdioTransport {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := &stdioTransport{w: inW, r: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := g.ServeStdio(context.Background(), inR, outW)
		outW.CloseWithError(io.EOF)
		st.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-st.done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return st
}

func (s *stdioTransport) name() string { return "stdio" }

func (s *stdioTransport) send(t *testing.T, body []byte) []byte {
	t.Helper()
	if _, err := fmt.Fprintf(s.w, "Content-Length: %d\r\nContent-Type: application/json\r\n\r\n%s", len(body), body); err != nil {
		t.Fatalf("stdio write: %v", err)
	}
	b, err := readFrame(s.r)
	if err != nil {
		t.Fatalf("stdio read: %v", err)
	}
	return b
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	hdr, err := textproto.NewReader(r).ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil {
		return nil, fmt.Errorf("Content-Length %q: %v", hdr.Get("Content-Length"), err)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// agent is a test Observed Agent: it builds and signs requests for one
// session.
type agent struct {
	sessionID string
	agentID   string
	signer    sig.Signer
	now       func() time.Time
	n         int
}

func newAgent(t *testing.T, key *sig.PrivateKey, now func() time.Time) *agent {
	t.Helper()
	sid := uuid()
	a := &agent{sessionID: sid, agentID: "agent-7", now: now}
	if key != nil {
		s, err := key.Signer(sid)
		if err != nil {
			t.Fatal(err)
		}
		a.signer = s
	}
	return a
}

// params builds a request's params; edit may change them before signing.
func (a *agent) envelope(t *testing.T, method string, payload any, edit func(p map[string]any)) []byte {
	t.Helper()
	a.n++
	params := map[string]any{
		"acs_version": "0.1.0",
		"request_id":  uuid(),
		"timestamp":   a.now().UTC().Format(time.RFC3339Nano),
		"metadata":    map[string]any{"agent_id": a.agentID, "session_id": a.sessionID},
		"payload":     payload,
	}
	if edit != nil {
		edit(params)
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.n, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if a.signer == nil {
		return b
	}
	out, err := sig.SignEnvelope(b, sig.Params, a.signer)
	if err != nil {
		t.Fatalf("sign request: %v", err)
	}
	return out
}

func (a *agent) hello(t *testing.T, edit func(h map[string]any)) map[string]any {
	h := map[string]any{
		"acs_versions_supported": []string{"0.1.0"},
		"methods_implemented":    append(append([]string{}, guardian.Steps...), "protocols/MCP/tools/call", "wrapped:mcp-2025-06-18/tools/call", "agbom/snapshot", "agbom/changed", "system/ping"),
		"transports_supported":   []string{"http", "stdio"},
		"provenance_producer":    "deterministic",
		"wrapped_protocols":      []map[string]string{{"protocol": "MCP", "version": "2025-06-18"}},
		"profiles_supported":     []string{"acs-core", "acs-audit", "acs-crypto"},
	}
	if edit != nil {
		edit(h)
	}
	return h
}

// reply is a decoded response.
type reply struct {
	raw    []byte
	ID     json.RawMessage `json:"id"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func decode(t *testing.T, b []byte) reply {
	t.Helper()
	var r reply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	r.raw = b
	checkResponseSchema(t, b)
	return r
}

func (r reply) decision() string {
	if r.Result == nil {
		return ""
	}
	s, _ := r.Result["decision"].(string)
	return s
}

func (r reply) str(k string) string {
	s, _ := r.Result[k].(string)
	return s
}

func (r reply) reasonCodes() []string {
	var out []string
	for _, c := range asSlice(r.Result["reason_codes"]) {
		out = append(out, c.(string))
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func mustResult(t *testing.T, r reply) {
	t.Helper()
	if r.Error != nil || r.Result == nil {
		t.Fatalf("want a result, got %s", r.raw)
	}
}

func mustError(t *testing.T, r reply, code int, reason string, msgContains string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want error %d, got %s", code, r.raw)
	}
	if r.Error.Code != code {
		t.Fatalf("error code = %d, want %d: %s", r.Error.Code, code, r.raw)
	}
	if reason != "" && r.Error.Data["reason"] != reason {
		t.Errorf("data.reason = %v, want %q: %s", r.Error.Data["reason"], reason, r.raw)
	}
	if msg, _ := r.Error.Data["message"].(string); !strings.Contains(msg, msgContains) {
		t.Errorf("data.message = %q, want it to contain %q", msg, msgContains)
	}
}

// chainJSONL exports a session's stored chain as JSON Lines with the
// chain links put back, the input of verify.VerifyChain.
func chainJSONL(t *testing.T, st ledger.Store, sessionID string) ([]ledger.Entry, []byte) {
	t.Helper()
	var entries []ledger.Entry
	var buf bytes.Buffer
	for e, err := range ledger.AllEntries(context.Background(), st, sessionID) {
		if err != nil {
			t.Fatalf("entries: %v", err)
		}
		entries = append(entries, e)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e.Content, &m); err != nil {
			t.Fatal(err)
		}
		m["entry_hash"] = json.RawMessage(strconv.Quote(e.EntryHash.String()))
		if e.PreviousHash != nil {
			m["previous_hash"] = json.RawMessage(strconv.Quote(e.PreviousHash.String()))
		} else {
			m["previous_hash"] = json.RawMessage("null")
		}
		b, _ := json.Marshal(m)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return entries, buf.Bytes()
}

// verifyStoredChain replays a session's stored chain with package verify
// and checks it ends at head.
func verifyStoredChain(t *testing.T, st ledger.Store, sessionID, head string) []ledger.Entry {
	t.Helper()
	entries, jsonl := chainJSONL(t, st, sessionID)
	rep, err := verify.VerifyChain(bytes.NewReader(jsonl))
	if err != nil {
		t.Fatalf("verify.VerifyChain: %v", err)
	}
	if !rep.Verified() {
		t.Fatalf("chain does not verify: %+v", rep.Findings)
	}
	if rep.Head.String() != head {
		t.Fatalf("verified head %s, last published chain_hash %s", rep.Head, head)
	}
	return entries
}

func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var _ = acs.Hash{}

// checkResponseSchema validates every response the tests receive against
// the official response-envelope.json (ServerHello included).
func checkResponseSchema(t *testing.T, b []byte) {
	t.Helper()
	if err := schemas.Validate(schemas.ResponseEnvelope, b); err != nil {
		t.Fatalf("response does not match response-envelope.json: %v\n%s", err, b)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// checkPublishedHeads runs the auditor's check of ACS §8.6 (verify.HeadChecker)
// over a session's stored responses and chain: every published chain_hash
// must be signed by keys and match the recomputed head at its entry.
func checkPublishedHeads(t *testing.T, st storeopen.Store, sessionID string, keys *sig.KeySet) {
	t.Helper()
	ctx := context.Background()
	_, jsonl := chainJSONL(t, st, sessionID)
	lines := bytes.Split(bytes.TrimSuffix(jsonl, []byte("\n")), []byte("\n"))
	hc := verify.NewHeadChecker(keys, sessionID)
	for i := range lines {
		resp, err := st.Response(ctx, sessionID, int64(i))
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		findings, _, err := hc.AddResponse(resp)
		if err != nil || len(findings) > 0 {
			t.Fatalf("response %d: %v %+v", i, err, findings)
		}
	}
	var cv verify.ChainVerifier
	for i, line := range lines {
		e, err := acs.ParseEntry(line)
		if err != nil {
			t.Fatal(err)
		}
		if f := cv.Add(e); len(f) > 0 {
			t.Fatalf("entry %d: %+v", i, f)
		}
		if f := hc.CheckEntry(i, e, cv.Head(), false); len(f) > 0 {
			t.Fatalf("published head at entry %d: %+v", i, f)
		}
	}
	if f := hc.Finish(); len(f) > 0 {
		t.Fatalf("published heads: %+v", f)
	}
	if hc.Responses() != len(lines) {
		t.Fatalf("%d responses checked, %d entries", hc.Responses(), len(lines))
	}
}

// another is a second Guardian over the same ledger, keys and clock: a
// restarted process, or a replica beside the first.
func (s *setup) another(t *testing.T) *guardian.Guardian {
	t.Helper()
	g, err := guardian.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// withHead is an envelope edit that sends head as the client's view of the
// chain (metadata.session_state.chain_hash, ACS §8.6).
func withHead(head string) func(p map[string]any) {
	return func(p map[string]any) {
		p["metadata"].(map[string]any)["session_state"] = map[string]any{"chain_hash": head}
	}
}

// shakeHands sends the agent's default ClientHello over each transport and
// requires a ServerHello.
func (a *agent) shakeHands(t *testing.T, tps ...transport) {
	t.Helper()
	for _, tp := range tps {
		mustResult(t, decode(t, tp.send(t, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil))))
	}
}

// newReplicas is a setup with a second Guardian over the same ledger (two
// replicas, or a second process under the same keys), each behind its own
// HTTP server, and an agent that has shaken hands with neither.
func newReplicas(t *testing.T, kind string) (*setup, [2]*httpTransport, *agent) {
	t.Helper()
	s := newSetup(t, kind, nil)
	tps := [2]*httpTransport{newHTTP(t, s.g), newHTTP(t, s.another(t))}
	return s, tps, newAgent(t, mustKeys(t).hmac, s.clock.Now)
}
