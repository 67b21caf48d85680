package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/types"
	"github.com/open-policy-agent/opa/v1/util"
	"github.com/open-policy-agent/opa/v1/version"

	"github.com/acsledger/acsledger/ledger"
)

// DecisionRule is the rule every bundle must define. Its value, for every
// input, is a decision object (see docs/policy.md): the ACS result fields
// decision, reasoning, reason_codes, policy_data, cited_provenance_ids,
// modifications, ask_details and defer_details, plus rule_ids, the
// non-empty list of rules that fired.
const DecisionRule = "data.acs.decision"

var decisionRef = ast.MustParseRef(DecisionRule)

// forbiddenBuiltins may not appear in a bundle. ACS §12.1: canonical
// policies make no external calls, and a decision that depends on the
// network or the Guardian's environment cannot be replayed from the ledger.
var forbiddenBuiltins = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
}

// capabilities are this OPA version's, less forbiddenBuiltins.
var capabilities = func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return forbiddenBuiltins[b.Name] })
	return c
}()

// Recorder records a bundle before any decision cites it. both
// stores implement it (ledger.PolicyBundleStore). PutPolicyBundle must be idempotent for an
// identical (ID, Version, Digest) and return ledger.ErrConflict for the
// same ID and Version with another digest.
type Recorder interface {
	PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error
}

// ErrBadBundle is wrapped by every error about a bundle that cannot be
// used: a Rego syntax or compile error, a missing or ill-typed decision
// rule, or a decision rule whose output breaks the decision contract.
var ErrBadBundle = errors.New("bad policy bundle")

// BundleError is a bundle refused at load. Module and Line locate the
// problem when it has a place in the source.
type BundleError struct {
	Bundle  string // "id@version"
	Module  string
	Line    int
	Problem string
}

func (e *BundleError) Error() string {
	if e.Module == "" {
		return fmt.Sprintf("policy bundle %s: %s", e.Bundle, e.Problem)
	}
	return fmt.Sprintf("policy bundle %s: %s:%d: %s", e.Bundle, e.Module, e.Line, e.Problem)
}

func (e *BundleError) Unwrap() error { return ErrBadBundle }

// Engine decides on steps under the current version of a policy bundle. A
// new version can be loaded while Decide calls run; each call uses exactly
// one version, the one it cites in its policy_references.
type Engine struct {
	rec Recorder
	now func() time.Time

	loadMu sync.Mutex
	cur    atomic.Pointer[compiled]
}

// compiled is one bundle version ready to evaluate.
type compiled struct {
	bundle  *Bundle
	content []byte
	digest  string
	query   rego.PreparedEvalQuery
	// rule locates the decision rule, for errors about its output.
	ruleModule string
	ruleLine   int
}

// New returns an Engine running b, after recording b through rec. now
// stamps RecordedAt; nil means time.Now.
func New(ctx context.Context, b *Bundle, rec Recorder, now func() time.Time) (*Engine, error) {
	if now == nil {
		now = time.Now
	}
	e := &Engine{rec: rec, now: now}
	if err := e.Load(ctx, b); err != nil {
		return nil, err
	}
	return e, nil
}

// Load compiles b, records it, and makes it the version later Decide calls
// use, without stopping calls in flight. If b does not compile, fails its
// load checks, or cannot be recorded, Load returns the error and the engine
// keeps its previous version. Concurrent Loads record and switch one at a
// time; the last to do so wins.
func (e *Engine) Load(ctx context.Context, b *Bundle) error {
	c, err := compile(ctx, b)
	if err != nil {
		return err
	}
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	err = e.rec.PutPolicyBundle(ctx, ledger.PolicyBundle{
		ID:         c.bundle.ID,
		Version:    c.bundle.Version,
		Digest:     c.digest,
		Content:    c.content,
		RecordedAt: e.now().UTC(),
	})
	if err != nil {
		return fmt.Errorf("couldn't record policy bundle %s: %w", c.bundle.name(), err)
	}
	e.cur.Store(c)
	return nil
}

// EvaluatorVersion names the evaluator for a result's
// metadata.evaluator_version (ACS §6.1): this package on the OPA version it
// is built with.
func EvaluatorVersion() string { return "acsledger-policy/opa-" + version.Version }

// BundleRef names a loaded bundle version.
type BundleRef struct {
	ID, Version, Digest string
}

// Current returns the bundle version Decide uses now.
func (e *Engine) Current() BundleRef {
	c := e.cur.Load()
	return BundleRef{ID: c.bundle.ID, Version: c.bundle.Version, Digest: c.digest}
}

// Decide evaluates in under the current bundle version.
//
// The returned error wraps ErrBadDecision when the policy fails at run
// time or its output breaks the decision contract, ErrBadInput when in is
// malformed, and the context's error when ctx ends first; the Guardian
// treats each as a decision failure (ACS §6.4), never as an ALLOW.
func (e *Engine) Decide(ctx context.Context, in *Input) (*Decision, error) {
	return e.cur.Load().decide(ctx, in, builtins.NDBCache{})
}

// Replay evaluates in under bundle b with the non-deterministic built-in
// results recorded with the original decision (Decision.NDBuiltinCache), so
// that a decision made under b is reproduced exactly. Evaluate under a newer
// bundle and compare with Diff to ask whether today's policy would decide
// differently. Replay records nothing.
//
// Replay keeps the last few bundle versions it compiled, by digest, so
// replaying a run of decisions made under one version compiles it once.
func Replay(ctx context.Context, b *Bundle, in *Input, ndCache []byte) (*Decision, error) {
	c, err := replays.get(ctx, b)
	if err != nil {
		return nil, err
	}
	cache, err := decodeNDCache(ndCache)
	if err != nil {
		return nil, fmt.Errorf("couldn't read the recorded non-deterministic built-in cache: %w", err)
	}
	return c.decide(ctx, in, cache)
}

// Compiled is a bundle compiled once for many replays of recorded inputs
// under it (a what-if run, guardian/whatif): Replay without finding the
// bundle again by digest on every call.
type Compiled struct{ c *compiled }

// Compile compiles b as Replay would and runs its load checks (the
// decision rule exists, compiles, and gives a well-formed decision on the
// load probes), without recording it. A bundle that fails is refused with
// OPA's own message in a *BundleError.
func Compile(ctx context.Context, b *Bundle) (*Compiled, error) {
	c, err := replays.get(ctx, b)
	if err != nil {
		return nil, err
	}
	return &Compiled{c: c}, nil
}

// Replay is the package's Replay under the compiled bundle.
func (c *Compiled) Replay(ctx context.Context, in *Input, ndCache []byte) (*Decision, error) {
	cache, err := decodeNDCache(ndCache)
	if err != nil {
		return nil, fmt.Errorf("couldn't read the recorded non-deterministic built-in cache: %w", err)
	}
	return c.c.decide(ctx, in, cache)
}

// replayCache holds compiled bundle versions for Replay, by digest.
type replayCache struct {
	mu   sync.Mutex
	byID map[string]*compiled
}

const replayCacheSize = 8

var replays = &replayCache{byID: map[string]*compiled{}}

func (r *replayCache) get(ctx context.Context, b *Bundle) (*compiled, error) {
	digest, err := b.Digest()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	r.mu.Lock()
	c, ok := r.byID[digest]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	if c, err = compile(ctx, b); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.byID {
		if len(r.byID) < replayCacheSize {
			break
		}
		delete(r.byID, k)
	}
	r.byID[digest] = c
	return c, nil
}

func (c *compiled) decide(ctx context.Context, in *Input, cache builtins.NDBCache) (*Decision, error) {
	d, err := c.eval(ctx, in, cache)
	var op *outputProblem
	if errors.As(err, &op) {
		return nil, fmt.Errorf("%w: policy %s: %s (%s:%d) on %s: %s", ErrBadDecision,
			c.bundle.name(), DecisionRule, c.ruleModule, c.ruleLine, in.Method, op.problem)
	}
	return d, err
}

// outputProblem is a policy fault: a run-time error of the decision rule or
// an output that breaks the contract.
type outputProblem struct{ problem string }

func (p *outputProblem) Error() string { return p.problem }

func (c *compiled) eval(ctx context.Context, in *Input, cache builtins.NDBCache) (*Decision, error) {
	v, params, err := in.value()
	if err != nil {
		return nil, err
	}
	rs, err := c.query.Eval(ctx, rego.EvalParsedInput(v), rego.EvalNDBuiltinCache(cache))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("couldn't evaluate policy %s on %s: %w", c.bundle.name(), in.Method, err)
		}
		// A runtime error (conflicting rule values, a failed built-in under
		// strict errors) is a fault of the policy, like a malformed output.
		return nil, &outputProblem{err.Error()}
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, &outputProblem{"the decision is undefined for " + in.Method}
	}
	raw, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, fmt.Errorf("couldn't encode the output of policy %s: %w", c.bundle.name(), err)
	}
	d, err := decisionFromOutput(raw, c.bundle, params)
	if err != nil {
		return nil, &outputProblem{err.Error()}
	}
	if d.NDBuiltinCache, err = encodeNDCache(cache); err != nil {
		return nil, fmt.Errorf("couldn't encode the non-deterministic built-in cache: %w", err)
	}
	return d, nil
}

// compile parses, compiles and prepares b, then evaluates it on the probe
// inputs so that a decision rule with the wrong output shape is refused at
// load rather than at the first real step.
func compile(ctx context.Context, b *Bundle) (*compiled, error) {
	// Work on a copy, so a caller changing its Bundle afterwards cannot
	// change what decisions cite.
	b = &Bundle{ID: b.ID, Version: b.Version, Modules: maps.Clone(b.Modules), Data: slices.Clone(b.Data)}
	content, err := b.Content()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	name := b.name()
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, p := range b.modulePaths() {
		m, err := ast.ParseModuleWithOpts(p, b.Modules[p], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, astError(name, p, err)
		}
		modules[p] = m
	}
	comp := ast.NewCompiler().
		WithDefaultRegoVersion(ast.RegoV1).
		WithCapabilities(capabilities)
	comp.Compile(modules)
	if comp.Failed() {
		return nil, astError(name, "", comp.Errors)
	}

	rules := comp.GetRulesExact(decisionRef)
	if len(rules) == 0 {
		return nil, &BundleError{Bundle: name, Problem: "no module defines the decision rule " + DecisionRule}
	}
	c := &compiled{bundle: b, content: content, digest: digestOf(content)}
	if loc := rules[0].Location; loc != nil {
		c.ruleModule, c.ruleLine = loc.File, loc.Row
	}
	// The type checker knows the shape of most rule values; refuse one
	// that can never be an object before evaluating anything.
	if t := comp.TypeEnv.GetByRef(decisionRef); t != nil && !types.Nil(t) && types.Compare(t, types.A) != 0 {
		if _, isObject := t.(*types.Object); !isObject && !anyHasObject(t) {
			return nil, &BundleError{Bundle: name, Module: c.ruleModule, Line: c.ruleLine,
				Problem: fmt.Sprintf("%s must be an object, but its value is of type %s", DecisionRule, t)}
		}
	}

	data := map[string]any{}
	if b.Data != nil {
		if err := util.UnmarshalJSON(b.Data, &data); err != nil {
			return nil, &BundleError{Bundle: name, Module: "data.json", Problem: fmt.Sprintf("couldn't parse data: %v", err)}
		}
	}
	pq, err := rego.New(
		rego.Query(DecisionRule),
		rego.Compiler(comp),
		rego.Store(inmem.NewFromObject(data)),
		rego.StrictBuiltinErrors(false),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: policy bundle %s: couldn't prepare %s: %w", ErrBadBundle, name, DecisionRule, err)
	}
	c.query = pq

	for _, in := range probes {
		if _, err := c.eval(ctx, in, builtins.NDBCache{}); err != nil {
			return nil, &BundleError{Bundle: name, Module: c.ruleModule, Line: c.ruleLine,
				Problem: fmt.Sprintf("%s fails on the load probe %s: %v", DecisionRule, in.Method, err)}
		}
	}
	return c, nil
}

func anyHasObject(t types.Type) bool {
	a, ok := t.(types.Any)
	if !ok {
		return false
	}
	for _, x := range a {
		if _, isObject := x.(*types.Object); isObject || types.Compare(x, types.A) == 0 {
			return true
		}
	}
	return false
}

// astError turns OPA's parse and compile errors into a BundleError naming
// the module and line of the first one.
func astError(bundle, module string, err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return &BundleError{Bundle: bundle, Module: module, Problem: err.Error()}
	}
	first := errs[0]
	be := &BundleError{Bundle: bundle, Module: module, Problem: first.Message}
	for name := range forbiddenBuiltins {
		if first.Message == "undefined function "+name {
			be.Problem += " (forbidden: ACS §12.1 policies make no external calls, and a replay could not reproduce one)"
		}
	}
	if first.Location != nil {
		if first.Location.File != "" {
			be.Module = first.Location.File
		}
		be.Line = first.Location.Row
	}
	if len(errs) > 1 {
		be.Problem += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
	}
	return be
}
