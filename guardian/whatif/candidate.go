package whatif

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/acsledger/acsledger/guardian/policy"
)

// DefaultMaxBundleBytes caps a candidate bundle: the sum of its files'
// sizes, and the size of an uploaded archive.
const DefaultMaxBundleBytes = 8 << 20

// ErrBadCandidate is wrapped by every refusal of a candidate bundle: it
// does not compile, lacks the decision rule, or is too large. The message
// is OPA's own where OPA gave one.
var ErrBadCandidate = errors.New("bad candidate policy")

// Candidate is a policy bundle a run evaluates recorded steps under: the
// Guardian's decision rule (policy.DecisionRule) for Guardian steps, and
// the rule at each recorded path for ingested OPA decisions.
type Candidate struct {
	Bundle *policy.Bundle
	// Digest is the bundle's content digest (policy.Bundle.Digest).
	Digest string
	// Guardian is true when the bundle defines the decision rule, so
	// Guardian steps can be evaluated.
	Guardian bool

	guardian *policy.Compiled
	compiler *ast.Compiler
	data     map[string]any

	mu      sync.Mutex
	queries map[string]*rego.PreparedEvalQuery // by OPA decision path
}

// offline are this OPA's capabilities less the built-ins that reach
// outside the bundle (as guardian/policy refuses them, ACS §12.1): a
// what-if run must not call out, and a decision that read external data
// could not be replayed from the ledger anyway.
var offline = func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return b.Name == "http.send" || b.Name == "net.lookup_ip_addr" || b.Name == "opa.runtime"
	})
	return c
}()

// maxQueries bounds the prepared queries a candidate keeps, one per
// distinct OPA decision path seen.
const maxQueries = 256

// NewCandidate compiles b. needGuardian requires the Guardian's decision
// rule and its load checks (a run that may meet Guardian steps); without
// it the bundle must still compile. Either way a bundle that fails is
// refused here, before any step is evaluated.
func NewCandidate(ctx context.Context, b *policy.Bundle, needGuardian bool) (*Candidate, error) {
	content, err := b.Content()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
	}
	if len(content) > DefaultMaxBundleBytes {
		return nil, fmt.Errorf("%w: the bundle is %d bytes, more than the cap of %d", ErrBadCandidate, len(content), DefaultMaxBundleBytes)
	}
	c := &Candidate{Bundle: b, queries: map[string]*rego.PreparedEvalQuery{}}
	c.Digest, _ = b.Digest()
	modules := map[string]*ast.Module{}
	for p, src := range b.Modules {
		m, err := ast.ParseModuleWithOpts(p, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCandidate, p, err)
		}
		modules[p] = m
	}
	c.compiler = ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithCapabilities(offline)
	if c.compiler.Compile(modules); c.compiler.Failed() {
		return nil, fmt.Errorf("%w: %w", ErrBadCandidate, c.compiler.Errors)
	}
	c.data = map[string]any{}
	if b.Data != nil {
		if err := util.UnmarshalJSON(b.Data, &c.data); err != nil {
			return nil, fmt.Errorf("%w: data.json: %w", ErrBadCandidate, err)
		}
	}
	hasRule := len(c.compiler.GetRulesExact(ast.MustParseRef(policy.DecisionRule))) > 0
	switch {
	case hasRule:
		if c.guardian, err = policy.Compile(ctx, b); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
		}
		c.Guardian = true
	case needGuardian:
		return nil, fmt.Errorf("%w: policy bundle %s@%s: no module defines the decision rule %s (evaluate ingested OPA decisions only with --source opa)",
			ErrBadCandidate, b.ID, b.Version, policy.DecisionRule)
	}
	return c, nil
}

// query returns the prepared query of an OPA decision path ("authz/allow"
// is data.authz.allow).
func (c *Candidate) query(ctx context.Context, decisionPath string) (*rego.PreparedEvalQuery, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q, ok := c.queries[decisionPath]; ok {
		return q, nil
	}
	ref := "data"
	for _, part := range strings.Split(strings.Trim(decisionPath, "/"), "/") {
		if part == "" {
			continue
		}
		ref += "[" + string(mustJSON(part)) + "]"
	}
	pq, err := rego.New(
		rego.Query(ref),
		rego.Compiler(c.compiler),
		rego.Store(inmem.NewFromObject(c.data)),
		rego.StrictBuiltinErrors(false),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("couldn't prepare %s: %w", ref, err)
	}
	if len(c.queries) >= maxQueries {
		clear(c.queries)
	}
	c.queries[decisionPath] = &pq
	return &pq, nil
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// LoadBundle reads a candidate bundle from a directory (every *.rego but
// *_test.rego, and data.json at the root) or from an OPA bundle archive
// (.tar.gz), under the size cap. id and version name it.
func LoadBundle(pathname, id, version string) (*policy.Bundle, error) {
	fi, err := os.Stat(pathname)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
	}
	if fi.IsDir() {
		fsys := os.DirFS(pathname)
		var total int64
		err := walkSizes(pathname, &total)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
		}
		if total > DefaultMaxBundleBytes {
			return nil, fmt.Errorf("%w: %s holds %d bytes of policy, more than the cap of %d", ErrBadCandidate, pathname, total, DefaultMaxBundleBytes)
		}
		b, err := policy.BundleFromFS(fsys, id, version)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
		}
		return b, nil
	}
	f, err := os.Open(pathname)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
	}
	defer f.Close()
	return ReadArchive(f, id, version)
}

// walkSizes adds up the sizes of the files under dir.
func walkSizes(dir string, total *int64) error {
	return fs.WalkDir(os.DirFS(dir), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		*total += fi.Size()
		return nil
	})
}

// ReadArchive reads an OPA bundle archive (gzip-compressed tar): its
// .rego files (not *_test.rego) and a data.json at the root. Other files
// (.manifest, signatures) are ignored. More than DefaultMaxBundleBytes,
// compressed or not, is refused.
func ReadArchive(r io.Reader, id, version string) (*policy.Bundle, error) {
	zr, err := gzip.NewReader(io.LimitReader(r, DefaultMaxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: not a gzip-compressed bundle: %w", ErrBadCandidate, err)
	}
	tr := tar.NewReader(io.LimitReader(zr, DefaultMaxBundleBytes+1))
	files := fstest.MapFS{}
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: not a tar archive (or larger than %d bytes): %w", ErrBadCandidate, DefaultMaxBundleBytes, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name != "data.json" && (path.Ext(name) != ".rego" || strings.HasSuffix(name, "_test.rego")) {
			continue
		}
		total += h.Size
		if total > DefaultMaxBundleBytes {
			return nil, fmt.Errorf("%w: the archive holds more than the cap of %d bytes", ErrBadCandidate, DefaultMaxBundleBytes)
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, tr); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCandidate, h.Name, err)
		}
		files[name] = &fstest.MapFile{Data: buf.Bytes()}
	}
	b, err := policy.BundleFromFS(files, id, version)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCandidate, err)
	}
	return b, nil
}
