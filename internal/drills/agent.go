//go:build drills

package drills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/acsagent"
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

// MustLoadAgentKeys is LoadAgentKeys for a drill: an error fails t.
func MustLoadAgentKeys(t testing.TB, dir string) *AgentKeys {
	t.Helper()
	ak, err := LoadAgentKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ak
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

// Agent is one ACS session signed with HMAC-SHA256 over HTTP: the
// shared agent (internal/acsagent) with the answers' signatures checked.
type Agent struct {
	s    *acsagent.Session
	keys *AgentKeys
	http *http.Client
	// hello is the request_id of the handshake: a request the Guardian
	// remembers (ACS §10.3) but records no entry for.
	hello string
}

// NewAgent returns an agent for a new session against the server at url.
func NewAgent(url string, keys *AgentKeys) (*Agent, error) {
	// Its own transport: a connection to a killed server is not reused
	// by the next one.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	s, err := acsagent.New(url, "drill-agent", keys.hmac, hc)
	if err != nil {
		return nil, err
	}
	return &Agent{s: s, keys: keys, http: hc}, nil
}

// HelloID returns the request_id of the agent's handshake, "" before it.
func (a *Agent) HelloID() string { return a.hello }

// Session returns the agent's session id.
func (a *Agent) Session() string { return a.s.ID }

// Close drops the agent's idle connections.
func (a *Agent) Close() { a.http.CloseIdleConnections() }

// readFile is a step the shipped baseline policy allows.
var readFile = map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{"path": acsagent.Arg("README.md", "p-1", "user_input")}}

// Hello sends the handshake and then sessionStart, whose answer it
// returns (a step like any other, recorded in the chain); the session is
// then ready for steps.
func (a *Agent) Hello(ctx context.Context) (Answer, error) {
	ans := a.Send(ctx, guardian.MethodHello, acsagent.HelloBody()["payload"])
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
	ans := Answer{Session: a.s.ID, Sent: time.Now()}
	rid, _, body, err := a.s.Post(ctx, method, map[string]any{"payload": payload})
	ans.RequestID = rid
	if err != nil {
		ans.Err, ans.Refused = err, isRefused(err)
		return ans
	}
	ans.Got = time.Now()
	if _, err := sig.VerifyEnvelope(body, a.keys.set, a.s.ID); err != nil {
		ans.Err = fmt.Errorf("%w: %v: %s", errUnsigned, err, body)
		return ans
	}
	var r acsagent.Reply
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
