package guardian

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

// Version is the ACS version this Guardian speaks.
const Version = "0.1.0"

// Defaults for the zero values of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultSkewWindow   = 300 * time.Second // ACS §10.3 RECOMMENDED
	DefaultTimeout      = 5 * time.Second
	DefaultDeferTimeout = 60 * time.Second
	DefaultMaxDeferrals = 3
	DefaultSessionIdle  = time.Hour
)

// Failure postures (ACS §6.4), negotiated as on_decision_failure.
const (
	PostureProceed = "proceed"
	PostureDeny    = "deny"
)

// Store is what the Guardian calls on the ledger (the ledger
// roles document each contract): it reads a session's head, appends the entry
// of an intent, appends a step's entry with its signed response, params and
// seen key in one transaction (ledger.ErrReplay for a key seen before), and
// records a request's seen key on its own (ACS §10.3). Entries and
// Request read a session's chain and the params beside it back when the
// session resumes after a restart or idle eviction (resume.go). Every append is
// the Guardian's (ledger.WriterGuardian) and a compare-and-swap on the head
// it was decided against (ledger.Record.Expect): the store returns a
// *ledger.HeadMovedError when another writer moved it, and a
// *ledger.WriterMismatchError for a session the Guardian does not own
// (guardian/cas.go).
type Store interface {
	Session(ctx context.Context, sessionID string) (ledger.Session, error)
	Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error)
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
	Append(ctx context.Context, r ledger.Record) (ledger.Appended, error)
	AppendRequest(ctx context.Context, r ledger.Record, params []byte, seen ledger.Seen, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error)
	RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error
}

// Config configures a Guardian. Store, Policy and at least one signing key
// are required; every other zero value means the default named beside it.
type Config struct {
	// Store holds the chains, the signed responses and the history of seen requests.
	Store Store
	// Policy decides on every content-bearing step.
	Policy Policy

	// Keys verifies request signatures; a session is bound to the key_id
	// that signed its handshake/hello. HMAC-SHA256 keys in it are the input
	// keying material of §10's per-session keys. Nil means HMACKeys (agents
	// with asymmetric keys need their public keys here).
	Keys *sig.KeySet
	// HMACKeys sign the responses of sessions whose requests are signed
	// with HMAC-SHA256: the response uses the same key_id and the same
	// per-session key. A session signed with an HMAC key_id missing here is
	// refused at handshake unless ResponseKey is set.
	HMACKeys []*sig.PrivateKey
	// ResponseKey is the asymmetric key (ECDSA-P256, ML-DSA-65, or any
	// registered asymmetric or hybrid algorithm) that signs the responses
	// of every other session, and error responses that belong to no
	// session.
	ResponseKey *sig.PrivateKey

	// Clock is the Guardian's time source (default time.Now).
	Clock func() time.Time
	// Logger receives operational events (default slog.Default()).
	Logger *slog.Logger

	// MaxBodyBytes caps one HTTP body or stdio frame (default 1 MiB).
	MaxBodyBytes int64
	// SkewWindow is skew_window_ms (§10.3, default 5 minutes).
	SkewWindow time.Duration
	// Timeout and PerMethodTimeout are timeout_config (§4, default 5 s).
	Timeout          time.Duration
	PerMethodTimeout map[string]time.Duration
	// OnDecisionFailure is the failure posture (§6.4), advertised in the
	// ServerHello: PostureDeny (default) or PostureProceed. It governs
	// what the Guardian answers when the policy or the ledger fails: a
	// signed DENY under deny, a signed -32603 error under proceed, whose
	// agent then applies its own posture (§6.4 defaults to proceed: an
	// agent that follows it acts on a step nothing recorded). Deny is
	// the default here so that an outage fails closed unless the
	// deployment chose otherwise (docs/conformance.md, "Divergences").
	OnDecisionFailure string
	// RequireProvenance is policy_requires_provenance (§4).
	RequireProvenance bool
	// ApproverTypes is approver_types_supported (§4): of "human", "agent",
	// "service". ASK to any other type is refused.
	ApproverTypes []string
	// ApproverCapable reports whether an agent's client can route ASK
	// (§9.2, decided by deployment means). Nil means no client can, so
	// every ASK is substituted.
	ApproverCapable func(agentID string) bool
	// ModifyCapable reports whether an agent's client can apply MODIFY
	// (§6.5, decided by deployment means, at handshake). Nil means every
	// client can; one that cannot gets DENY with modify_unsupported (ALLOW
	// at postCompact) wherever the policy returns MODIFY.
	ModifyCapable func(agentID string) bool
	// ApproverKeys authenticates approvers: an approval must be signed by
	// the key whose key_id is the approver's id (§9). Nil means no
	// approval can be accepted.
	ApproverKeys *sig.KeySet
	// AdmitAgent refuses a session (SESSION_REFUSED) when it returns an
	// error; nil admits every agent.
	AdmitAgent func(agentID string) error
	// MaxDeferrals bounds DEFER decisions per session (§6, default 3).
	MaxDeferrals int
	// DeferTimeout is the default resolution_timeout_ms (default 60 s).
	DeferTimeout time.Duration
	// EvaluatorVersion is metadata.evaluator_version when the policy
	// names none.
	EvaluatorVersion string
	// TraceSteps emits ACS-Trace (docs/spec/trace/events.md): a span per
	// step named after the step's OpenTelemetry mapping, with the decision
	// as an acs.decision span event. Spans go to the global tracer
	// provider; without one installed they cost nothing.
	TraceSteps bool
	// SessionIdle is how long a session's in-memory state (binding,
	// Intent, pending ASKs) outlives its last request (default 1 hour).
	// The chain itself is in the ledger; an evicted session continues
	// after a new handshake.
	SessionIdle time.Duration
	// PolicyWorkers is how many policy evaluations run at once (default
	// twice GOMAXPROCS); more requests wait for a free evaluator, within
	// their decision timeout.
	PolicyWorkers int
	// Receipts serves MethodReceipt, the agent's copy of the receipt of
	// its own steps (docs/receipts.md); nil answers it method-not-found.
	Receipts ReceiptSource
}

// Guardian is an ACS Guardian. It is safe for concurrent use; requests of
// one session are serialized, so the chain head never races.
type Guardian struct {
	cfg      Config
	keys     *sig.KeySet
	hmacKeys map[string]*sig.PrivateKey
	algs     []string

	evals *evalPool

	mu        sync.Mutex
	sessions  map[string]*session
	lastSweep time.Time
}

// session is the Guardian's in-memory SessionContext (§8): the binding made
// at handshake and the state the chain does not hold.
type session struct {
	// mu serializes the session's requests, from the seen-request check to the
	// answer, so appends never fight each other's compare-and-swap.
	mu sync.Mutex

	// lastUsed is the Clock time of the session's latest request, in
	// Unix nanoseconds.
	lastUsed atomic.Int64

	id          string
	agentID     string
	keyID       string
	hello       clientHello
	signer      sig.Signer
	transport   string
	mcpVersions []string

	// Guarded by mu.
	head      *acs.Hash
	length    int64
	deferrals int
	intent    *Intent
	asks      map[string]acs.Approver // pending ASKs by step_id
	requested map[string][]string     // their requested capabilities
	grants    []grant                 // this_request grants, each bound to the request it answers
	// askRequests names, for each pending ASK by step_id, the request
	// it paused (requestKey), so that a this_request grant binds to it.
	askRequests map[string]string
	prov        ProvenanceLog // provenance objects seen in committed steps
	seen        seenSet       // request_ids and nonces recorded for the session

	// agentHead is the head last published to the agent in a signed
	// response; entries the Guardian wrote since (approver resolutions)
	// lie between it and head (docs/guardian.md, "Head after a grant").
	agentHead *acs.Hash
	// intentClosed is set once the Intent can no longer be established
	// (resume.go, intentOpener).
	intentClosed bool
	// modifyCapable is whether the client can apply MODIFY (§6.5),
	// decided at handshake.
	modifyCapable bool
	// skills are the session's skill registrations by skill_id (skills.go).
	skills map[string]skillRegistration
	// sealed is set once the chain ends in steps/sessionEnd: the session
	// accepts no handshake, step or resolution after it (resume.go).
	sealed bool
	// boundKey is the key_id that signed the session's stored requests,
	// read back from the ledger on resume ("" when none is stored): a
	// resumed session stays bound to it (resume.go).
	boundKey string
	// strictProvenance is set when the session accepted the
	// acs-provenance profile: payloads are validated against the strict
	// *.acs-provenance.json variants (schema.go).
	strictProvenance bool
}

// New checks cfg and returns a Guardian.
func New(cfg Config) (*Guardian, error) {
	if cfg.Store == nil {
		return nil, errors.New("guardian: Config.Store is required")
	}
	if cfg.Policy == nil {
		return nil, errors.New("guardian: Config.Policy is required")
	}
	if len(cfg.HMACKeys) == 0 && cfg.ResponseKey == nil {
		return nil, errors.New("guardian: Config needs HMACKeys or a ResponseKey to sign responses")
	}
	if cfg.ResponseKey != nil && cfg.ResponseKey.Algorithm().Symmetric() {
		return nil, errors.New("guardian: Config.ResponseKey must be asymmetric; HMAC keys go in HMACKeys")
	}
	g := &Guardian{cfg: cfg, hmacKeys: map[string]*sig.PrivateKey{}, sessions: map[string]*session{}}
	for _, k := range cfg.HMACKeys {
		if k.Algorithm() != sig.HMACSHA256 {
			return nil, fmt.Errorf("guardian: HMACKeys holds key %q of algorithm %s", k.KeyID(), k.Algorithm())
		}
		g.hmacKeys[k.KeyID()] = k
	}
	g.keys = cfg.Keys
	if g.keys == nil {
		var pubs []*sig.PublicKey
		for _, k := range cfg.HMACKeys {
			pubs = append(pubs, k.Public())
		}
		ks, err := sig.NewKeySet(pubs...)
		if err != nil {
			return nil, fmt.Errorf("guardian: %w", err)
		}
		g.keys = ks
	}
	if g.keys.Len() == 0 {
		return nil, errors.New("guardian: no request verification keys: set Config.Keys or HMACKeys")
	}
	seen := map[sig.Algorithm]bool{}
	for _, id := range g.keys.KeyIDs() {
		k, _ := g.keys.Get(id)
		seen[k.Algorithm()] = true
	}
	for _, a := range sig.Algorithms() {
		if seen[a] {
			g.algs = append(g.algs, string(a))
		}
	}
	c := &g.cfg
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	positiveOr(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	positiveOr(&c.SkewWindow, DefaultSkewWindow)
	positiveOr(&c.Timeout, DefaultTimeout)
	switch c.OnDecisionFailure {
	case "":
		c.OnDecisionFailure = PostureDeny
	case PostureProceed, PostureDeny:
	default:
		return nil, fmt.Errorf("guardian: OnDecisionFailure %q is not %q or %q", c.OnDecisionFailure, PostureProceed, PostureDeny)
	}
	for _, t := range c.ApproverTypes {
		if t != "human" && t != "agent" && t != "service" {
			return nil, fmt.Errorf("guardian: approver type %q is not human, agent or service", t)
		}
	}
	positiveOr(&c.MaxDeferrals, DefaultMaxDeferrals)
	positiveOr(&c.DeferTimeout, DefaultDeferTimeout)
	positiveOr(&c.SessionIdle, DefaultSessionIdle)
	positiveOr(&c.PolicyWorkers, 2*runtime.GOMAXPROCS(0))
	if c.EvaluatorVersion == "" {
		c.EvaluatorVersion = "acsledger-guardian/" + Version
	}
	g.evals = newEvalPool(c.PolicyWorkers)
	return g, nil
}

// positiveOr sets *v to d when it is zero or negative: the zero value of a
// Config field means its default.
func positiveOr[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// session returns the live session id and marks it used.
func (g *Guardian) session(id string) *session {
	g.mu.Lock()
	s := g.sessions[id]
	g.mu.Unlock()
	if s != nil {
		s.lastUsed.Store(g.cfg.Clock().UnixNano())
	}
	return s
}

// sweep forgets sessions idle for longer than SessionIdle, at most once
// per minute of Clock time. Called with g.mu held.
func (g *Guardian) sweep() {
	now := g.cfg.Clock()
	if now.Sub(g.lastSweep) < time.Minute {
		return
	}
	g.lastSweep = now
	cutoff := now.Add(-g.cfg.SessionIdle).UnixNano()
	for id, s := range g.sessions {
		if s.lastUsed.Load() < cutoff {
			delete(g.sessions, id)
		}
	}
}

// SetSigningKeys sorts private keys into c: HMAC-SHA256 keys into HMACKeys,
// and the asymmetric key named responseKeyID into ResponseKey. With
// responseKeyID "" the only asymmetric key is used, and more than one is an
// error. This is how a key directory (sig.LoadKeyDir) or --hmac-key flags
// become a Config.
func (c *Config) SetSigningKeys(keys []*sig.PrivateKey, responseKeyID string) error {
	var asym []*sig.PrivateKey
	for _, k := range keys {
		if k.Algorithm() == sig.HMACSHA256 {
			c.HMACKeys = append(c.HMACKeys, k)
			continue
		}
		if responseKeyID == "" || k.KeyID() == responseKeyID {
			asym = append(asym, k)
		}
	}
	switch {
	case len(asym) == 1:
		c.ResponseKey = asym[0]
	case len(asym) > 1:
		return fmt.Errorf("guardian: %d asymmetric keys could sign responses; name one", len(asym))
	case responseKeyID != "":
		return fmt.Errorf("guardian: no asymmetric private key with key_id %q", responseKeyID)
	}
	return nil
}
