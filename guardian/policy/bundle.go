package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// A Bundle is one version of a policy: Rego modules and an optional data
// document, named by ID and Version. The pair (ID, Version) is what decisions
// cite in policy_references (ACS §6.1), so a Bundle's content must never
// change under the same pair; the ledger refuses a second, different
// content for a recorded pair.
type Bundle struct {
	ID      string
	Version string
	// Modules maps a module's path inside the bundle (slash-separated,
	// relative, ending in ".rego") to its Rego v1 source text.
	Modules map[string]string
	// Data is a JSON object mounted at the root of the data document
	// (data.x for a member "x"), or nil for none.
	Data json.RawMessage
}

// bundleDoc is the canonical encoding of a Bundle: the JSON object
//
//	{"data": {...}, "id": "...", "modules": {"path.rego": "source"}, "version": "..."}
//
// serialized per RFC 8785 (JCS), with "data" absent when the bundle has none.
// Content is these bytes and Digest is the lowercase hex SHA-256 of them,
// so an auditor can recompute a recorded digest with any JCS implementation.
type bundleDoc struct {
	Data    json.RawMessage   `json:"data,omitempty"`
	ID      string            `json:"id"`
	Modules map[string]string `json:"modules"`
	Version string            `json:"version"`
}

// check reports the first structural problem of b: an empty ID or Version,
// no modules, a module path that is not a clean relative ".rego" path, or
// Data that is not a JSON object.
func (b *Bundle) check() error {
	switch {
	case b.ID == "":
		return errors.New("bundle has an empty id")
	case b.Version == "":
		return fmt.Errorf("bundle %s has an empty version", b.ID)
	case len(b.Modules) == 0:
		return fmt.Errorf("bundle %s has no Rego modules", b.name())
	}
	for p := range b.Modules {
		if !fs.ValidPath(p) || path.Ext(p) != ".rego" || strings.Contains(p, "\\") {
			return fmt.Errorf("bundle %s: module path %q is not a clean relative path ending in .rego", b.name(), p)
		}
	}
	if b.Data != nil {
		d := bytes.TrimLeft(b.Data, " \t\r\n")
		if len(d) == 0 || d[0] != '{' {
			return fmt.Errorf("bundle %s: data.json is not a JSON object", b.name())
		}
		if _, err := acs.Canonicalize(b.Data); err != nil {
			return fmt.Errorf("bundle %s: data.json: %w", b.name(), err)
		}
	}
	return nil
}

// name is "id@version", the form every error message uses.
func (b *Bundle) name() string { return b.ID + "@" + b.Version }

// Content returns the canonical encoding of b (see bundleDoc). It is what
// the ledger stores as ledger.PolicyBundle.Content.
func (b *Bundle) Content() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(bundleDoc{Data: b.Data, ID: b.ID, Modules: b.Modules, Version: b.Version})
	if err != nil {
		return nil, fmt.Errorf("couldn't encode bundle %s: %w", b.name(), err)
	}
	c, err := acs.Canonicalize(raw)
	if err != nil {
		return nil, fmt.Errorf("couldn't canonicalize bundle %s: %w", b.name(), err)
	}
	return c, nil
}

// Digest returns the lowercase hex SHA-256 of b's Content.
func (b *Bundle) Digest() (string, error) {
	c, err := b.Content()
	if err != nil {
		return "", err
	}
	return digestOf(c), nil
}

func digestOf(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// ParseBundle reads a bundle back from its encoding, as recorded in the
// ledger. It parses strictly: duplicate members, unknown members, invalid
// UTF-8 and trailing data are errors. The input need not be canonical;
// Content of the result is.
func ParseBundle(content []byte) (*Bundle, error) {
	if _, err := acs.Canonicalize(content); err != nil {
		return nil, fmt.Errorf("couldn't parse policy bundle: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	var doc bundleDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("couldn't parse policy bundle: %w", err)
	}
	b := &Bundle{ID: doc.ID, Version: doc.Version, Modules: doc.Modules}
	if doc.Data != nil && !bytes.Equal(bytes.TrimSpace(doc.Data), []byte("null")) {
		b.Data = doc.Data
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("couldn't parse policy bundle: %w", err)
	}
	return b, nil
}

// BundleFromRecord reads back a bundle the ledger recorded, for Replay. It
// refuses a record whose content does not hash to its digest, is not in
// canonical form, or names another ID or version than the record, so a
// replay runs exactly the policy the decisions cite.
func BundleFromRecord(r ledger.PolicyBundle) (*Bundle, error) {
	if got := digestOf(r.Content); got != r.Digest {
		return nil, fmt.Errorf("recorded policy bundle %s@%s: content hashes to %s, not the recorded digest %s", r.ID, r.Version, got, r.Digest)
	}
	b, err := ParseBundle(r.Content)
	if err != nil {
		return nil, fmt.Errorf("recorded policy bundle %s@%s: %w", r.ID, r.Version, err)
	}
	if b.ID != r.ID || b.Version != r.Version {
		return nil, fmt.Errorf("recorded policy bundle %s@%s: content names %s", r.ID, r.Version, b.name())
	}
	c, err := b.Content()
	if err != nil {
		return nil, fmt.Errorf("recorded policy bundle %s@%s: %w", r.ID, r.Version, err)
	}
	if !bytes.Equal(c, r.Content) {
		return nil, fmt.Errorf("recorded policy bundle %s@%s: content is not in canonical form", r.ID, r.Version)
	}
	return b, nil
}

// BundleFromFS reads a bundle from a directory tree: every "*.rego" file
// except Rego test files ("*_test.rego") is a module, and a "data.json" at
// the root is the data document.
func BundleFromFS(fsys fs.FS, id, version string) (*Bundle, error) {
	b := &Bundle{ID: id, Version: version, Modules: map[string]string{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case p == "data.json":
			raw, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			b.Data = raw
		case path.Ext(p) == ".rego" && !strings.HasSuffix(p, "_test.rego"):
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			b.Modules[p] = string(src)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't read bundle %s@%s: %w", id, version, err)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return b, nil
}

// modulePaths returns b's module paths in order, so compile errors come out
// in the same order every time.
func (b *Bundle) modulePaths() []string {
	ps := make([]string, 0, len(b.Modules))
	for p := range b.Modules {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
