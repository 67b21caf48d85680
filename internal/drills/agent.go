//go:build drills

package drills

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
)

// AgentKeys are the keys an agent signs its requests with and checks the
// Guardian's answers against.
type AgentKeys struct {
	hmac *sig.PrivateKey
	set  *sig.KeySet
}

// LoadAgentKeys reads the HMAC key and the public keys of a key directory.
func LoadAgentKeys(dir string) (*AgentKeys, error) {
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't load keys from %s: %w", dir, err)
	}
	for _, k := range kd.Private {
		if k.Algorithm() == sig.HMACSHA256 {
			return &AgentKeys{hmac: k, set: kd.KeySet}, nil
		}
	}
	return nil, fmt.Errorf("no HMAC-SHA256 key in %s", dir)
}

// Answer is what became of one request an agent sent.
type Answer struct {
	Session   string
	RequestID string
	// Sent is when the request left; Got when its answer arrived (zero
	// without an answer).
	Sent, Got time.Time
	// Err is set when no answer came back (the connection was refused or
	// cut): the request was in flight, or never left.
	Err error
	// Refused is true when the connection was refused: the request never
	// reached a server, so it cannot have been recorded.
	Refused bool
	// Decision, ChainHash and ReasonCodes are the signed result's; Code
	// and Reason a signed error's.
	Decision    string
	ChainHash   string
	ReasonCodes []string
	Code        int
	Reason      string
}

// Recorded reports whether the answer says the step is in the ledger: a
// signed result publishing the chain head the step's entry produced.
func (a Answer) Recorded() bool { return a.Err == nil && a.ChainHash != "" }

// InFlight reports whether the request reached the server but no answer
// came back.
func (a Answer) InFlight() bool { return a.Err != nil && !a.Refused }

// Agent is one ACS session signed with HMAC-SHA256 over HTTP.
type Agent struct {
	url     string
	session string
	keys    *AgentKeys
	signer  sig.Signer
	http    *http.Client
	id      int
	// hello is the request_id of the handshake: a request the Guardian
	// remembers (ACS §10.3) but records no entry for.
	hello string
}

// NewAgent returns an agent for a new session against the server at url.
func NewAgent(url string, keys *AgentKeys) (*Agent, error) {
	session := NewUUID()
	signer, err := keys.hmac.Signer(session)
	if err != nil {
		return nil, err
	}
	// Its own transport: a connection to a killed server is not reused
	// by the next one.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	return &Agent{url: url, session: session, keys: keys, signer: signer, http: hc}, nil
}

// HelloID returns the request_id of the agent's handshake, "" before it.
func (a *Agent) HelloID() string { return a.hello }

// Session returns the agent's session id.
func (a *Agent) Session() string { return a.session }

// Close drops the agent's idle connections.
func (a *Agent) Close() { a.http.CloseIdleConnections() }

// NewUUID returns a random version 4 UUID.
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

var helloPayload = map[string]any{
	"acs_versions_supported": []string{"0.1.0"},
	"methods_implemented":    []string{"steps/sessionStart", "steps/toolCallRequest", "steps/sessionEnd", "system/ping"},
	"transports_supported":   []string{"http"},
	"provenance_producer":    "deterministic",
	"profiles_supported":     []string{"acs-core", "acs-audit"},
}

// readFile is a step the shipped baseline policy allows.
var readFile = map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{"path": map[string]any{
	"value": "README.md", "provenance": map[string]any{"provenance_id": "p-1", "origin": "user_input"}}}}

// Hello sends the handshake and then sessionStart, whose answer it
// returns (a step like any other, recorded in the chain); the session is
// then ready for steps.
func (a *Agent) Hello(ctx context.Context) (Answer, error) {
	ans := a.Send(ctx, "handshake/hello", helloPayload)
	a.hello = ans.RequestID
	if ans.Err != nil || ans.Code != 0 {
		return ans, fmt.Errorf("handshake: %v (code %d %s)", ans.Err, ans.Code, ans.Reason)
	}
	ans = a.Send(ctx, "steps/sessionStart", map[string]any{})
	if ans.Err != nil || ans.Decision != "allow" {
		return ans, fmt.Errorf("sessionStart: %v (decision %q, code %d %s)", ans.Err, ans.Decision, ans.Code, ans.Reason)
	}
	return ans, nil
}

// Step sends one toolCallRequest the baseline policy allows.
func (a *Agent) Step(ctx context.Context) Answer {
	return a.Send(ctx, "steps/toolCallRequest", readFile)
}

// errUnsigned marks an answer whose signature does not verify: not an
// answer the agent could rely on.
var errUnsigned = errors.New("the answer's signature does not verify")

// Send sends one signed request and checks the signature of the answer.
func (a *Agent) Send(ctx context.Context, method string, payload any) Answer {
	a.id++
	ans := Answer{Session: a.session, RequestID: NewUUID(), Sent: time.Now()}
	env, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.id, "method": method, "params": map[string]any{
		"acs_version": "0.1.0",
		"request_id":  ans.RequestID,
		"timestamp":   time.Now().UTC().Format(time.RFC3339Nano),
		"metadata":    map[string]any{"agent_id": "drill-agent", "session_id": a.session},
		"payload":     payload,
	}})
	if err == nil {
		env, err = sig.SignEnvelope(env, sig.Params, a.signer)
	}
	if err != nil {
		ans.Err = err
		return ans
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+"/acs", bytes.NewReader(env))
	if err != nil {
		ans.Err = err
		return ans
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		ans.Err, ans.Refused = err, isRefused(err)
		return ans
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		ans.Err = err
		return ans
	}
	ans.Got = time.Now()
	if _, err := sig.VerifyEnvelope(body, a.keys.set, a.session); err != nil {
		ans.Err = fmt.Errorf("%w: %v: %s", errUnsigned, err, body)
		return ans
	}
	var r struct {
		Result *struct {
			Decision    string   `json:"decision"`
			ChainHash   string   `json:"chain_hash"`
			ReasonCodes []string `json:"reason_codes"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		ans.Err = fmt.Errorf("undecodable answer: %v: %s", err, body)
		return ans
	}
	switch {
	case r.Result != nil:
		ans.Decision, ans.ChainHash, ans.ReasonCodes = r.Result.Decision, r.Result.ChainHash, r.Result.ReasonCodes
	case r.Error != nil:
		ans.Code, ans.Reason = r.Error.Code, r.Error.Data.Reason
	default:
		ans.Err = fmt.Errorf("an answer with neither result nor error: %s", body)
	}
	return ans
}

// Load is a Guardian load: Sessions agents sending allowed steps one after
// another, each at most Steps of them.
type Load struct {
	URL      string
	Keys     *AgentKeys
	Sessions int
	Steps    int
	// Calls are the toolCallRequest payloads each agent sends in turn;
	// nil is one read_file the baseline policy allows.
	Calls []any
	// KeepGoing makes an agent carry on after a request got no answer
	// (after a pause), instead of stopping as when its server has gone.
	KeepGoing bool
	// BackOff makes an agent pause also after a signed answer that
	// recorded nothing (the failure posture's DENY or error), as a real
	// agent backs off, instead of sending its next step at once.
	BackOff bool
}

// Tally collects the answers of a load.
type Tally struct {
	mu       sync.Mutex
	answers  []Answer
	sessions []string
	hellos   []string
	errs     []error
}

// Answers returns the answers so far, in no particular order.
func (t *Tally) Answers() []Answer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Answer(nil), t.answers...)
}

// Sessions returns the sessions of the load, also those whose handshake
// a fault cut.
func (t *Tally) Sessions() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.sessions...)
}

// Handshakes returns the request_ids of the load's handshakes.
func (t *Tally) Handshakes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.hellos...)
}

// Recorded counts the answers that published a chain head.
func (t *Tally) Recorded() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, a := range t.answers {
		if a.Recorded() {
			n++
		}
	}
	return n
}

// FirstRecordedAfter returns when the first answer that published a
// chain head arrived after at (zero if none did): how long after a fault
// ended the service acknowledged commits again.
func (t *Tally) FirstRecordedAfter(at time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for _, a := range t.answers {
		if a.Recorded() && a.Got.After(at) && (first.IsZero() || a.Got.Before(first)) {
			first = a.Got
		}
	}
	return first
}

// Errs returns what stopped agents before their first step (a failed
// handshake, while the load was not being stopped), and answers whose
// signature did not verify.
func (t *Tally) Errs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]error(nil), t.errs...)
}

func (t *Tally) add(a Answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answers = append(t.answers, a)
	if errors.Is(a.Err, errUnsigned) {
		t.errs = append(t.errs, a.Err)
	}
}

// Start runs the load in the background until ctx ends, every agent has
// sent Steps steps or, without KeepGoing, lost its server. stop asks the
// agents to stop after the request each has in flight and waits for them.
func (l Load) Start(ctx context.Context) (t *Tally, stop func()) {
	t = &Tally{}
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
	)
	for range l.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := NewAgent(l.URL, l.Keys)
			if err != nil {
				t.mu.Lock()
				t.errs = append(t.errs, err)
				t.mu.Unlock()
				return
			}
			defer a.Close()
			t.mu.Lock()
			t.sessions = append(t.sessions, a.Session())
			t.mu.Unlock()
			start, err := a.Hello(ctx)
			t.mu.Lock()
			t.hellos = append(t.hellos, a.HelloID())
			t.mu.Unlock()
			if start.RequestID != a.HelloID() {
				t.add(start)
			}
			if err != nil {
				if ctx.Err() == nil && !stopped.Load() {
					t.mu.Lock()
					t.errs = append(t.errs, err)
					t.mu.Unlock()
				}
				return
			}
			for i := range l.Steps {
				if ctx.Err() != nil || stopped.Load() {
					return
				}
				var ans Answer
				if l.Calls == nil {
					ans = a.Step(ctx)
				} else {
					ans = a.Send(ctx, "steps/toolCallRequest", l.Calls[i%len(l.Calls)])
				}
				t.add(ans)
				switch {
				case ans.Err != nil && !l.KeepGoing:
					return
				case ans.Err != nil, l.BackOff && !ans.Recorded():
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return t, func() {
		stopped.Store(true)
		wg.Wait()
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
