// Package schemas embeds the JSON Schemas of ACS v0.1.0 and validates
// documents against them.
//
// official/ holds verbatim copies of the published schemas we could obtain
// (see official/SOURCES.md; response-envelope.json is the seed copy, which
// wins over older ones). ours/ holds schemas acsledger wrote from the
// specification text where no official file could be found:
// context-entry.json, ask-details.json and defer-details.json. Each says so
// in its $comment.
//
// The hook payload schemas come in two forms, named as the newest ACS text
// names them (ACS §7, conformance "ACS-Provenance"): the base schema
// hooks/X.json, where provenance is OPTIONAL so that ACS-Core payloads
// validate, and the strict variant hooks/X.acs-provenance.json, which
// restores provenance to the required set. The copies we could obtain are
// the older strict ones, so each is served verbatim as the strict variant
// and the base is derived from it by removing "provenance" from every
// required list, nothing else (Derived reports which; official/SOURCES.md).
//
// Every schema is registered under the canonical ACS base URL
// ([BaseURL] + its path), whatever $id the copy carries: the older copies
// use https://acs.org/schema/v0.1.0/..., and relative $refs between files
// (response-envelope.json -> request-envelope.json#/$defs/Signature) only
// resolve when all files share one base. Nothing is fetched from the
// network or the file system.
//
// Validation uses [github.com/santhosh-tekuri/jsonschema/v6] (draft 2020-12)
// with format assertions on: a request_id that is not a UUID or a timestamp
// that is not an RFC 3339 date-time is refused.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/acsledger/acsledger/acs"
)

// BaseURL is the base of the published ACS v0.1.0 schema $ids.
const BaseURL = "https://genai-security-project.github.io/agent-control-standard/schema/v0.1.0/"

// Names of the schemas used most; any path listed by Names works, with an
// optional "#/$defs/..." fragment.
const (
	RequestEnvelope  = "request-envelope.json"
	ResponseEnvelope = "response-envelope.json"
	ClientHello      = "handshake.json#/$defs/ClientHello"
	ServerHello      = "handshake.json#/$defs/ServerHello"
	Signature        = "request-envelope.json#/$defs/Signature"
	ContextEntry     = "context-entry.json"
	AskDetails       = "ask-details.json"
	DeferDetails     = "defer-details.json"
	Modifications    = "modifications.json"
	Provenance       = "provenance.json"
)

//go:embed official/*.json official/hooks/*.json official/agbom/*.json ours/*.json
var files embed.FS

// strictSuffix names the ACS-Provenance variant of a hook payload schema.
const strictSuffix = ".acs-provenance.json"

// Strict returns the name of the ACS-Provenance variant of hook payload
// schema name (hooks/X.json -> hooks/X.acs-provenance.json), or "" when
// name has none.
func Strict(name string) string {
	base, ok := strings.CutSuffix(name, ".json")
	if !ok || !strings.HasPrefix(name, "hooks/") || strings.HasSuffix(name, strictSuffix) {
		return ""
	}
	if _, err := fs.Stat(files, "official/"+name); err != nil {
		return ""
	}
	return base + strictSuffix
}

// Derived reports whether the schema at path is a base hook schema that
// acsledger derived from the official strict copy (provenance optional).
func Derived(path string) bool {
	path, _, _ = strings.Cut(path, "#")
	return Strict(path) != ""
}

// Ours reports whether the schema at path was written by acsledger rather
// than copied from the ACS publication.
func Ours(path string) bool {
	path, _, _ = strings.Cut(path, "#")
	_, err := fs.Stat(files, "ours/"+path)
	return err == nil
}

// Names returns the path of every embedded schema, sorted.
func Names() []string {
	var names []string
	for _, dir := range []string{"official", "ours"} {
		fs.WalkDir(files, dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
				names = append(names, strings.TrimPrefix(p, dir+"/"))
			}
			return nil
		})
	}
	for _, n := range slices.Clone(names) {
		if s := Strict(n); s != "" {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// Source returns the embedded bytes of the schema at path.
func Source(path string) ([]byte, error) {
	if base, ok := strings.CutSuffix(path, strictSuffix); ok && strings.HasPrefix(path, "hooks/") {
		return files.ReadFile("official/" + base + ".json")
	}
	if Derived(path) {
		return deriveBase(path)
	}
	for _, dir := range []string{"official", "ours"} {
		if b, err := files.ReadFile(dir + "/" + path); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no embedded schema %q", path)
}

// deriveBase returns the base form of the official strict hook schema at
// path: the same document with "provenance" removed from every required
// list (ACS §7: "The base hook payload schemas therefore mark provenance
// OPTIONAL so that ACS-Core ... validates").
func deriveBase(path string) ([]byte, error) {
	src, err := files.ReadFile("official/" + path)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("embedded schema %s: %w", path, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("embedded schema %s is not an object", path)
	}
	dropProvenance(m)
	m["$comment"] = "Derived by acsledger from the official strict copy (served as " + Strict(path) + "): provenance removed from every required list, as ACS §7 says the base hook schemas mark it OPTIONAL. Not an official ACS file."
	return json.Marshal(m)
}

// dropProvenance removes "provenance" from every required list in v.
func dropProvenance(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if req, ok := c.([]any); ok && k == "required" {
				v[k] = slices.DeleteFunc(slices.Clone(req), func(x any) bool { return x == "provenance" })
				continue
			}
			dropProvenance(c)
		}
	case []any:
		for _, c := range v {
			dropProvenance(c)
		}
	}
}

var (
	compileOnce sync.Once
	compiler    *jsonschema.Compiler
	compileErr  error

	compiledMu sync.Mutex
	compiled   = map[string]*jsonschema.Schema{}
)

func load() (*jsonschema.Compiler, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		// Refuse to load anything not embedded.
		c.UseLoader(jsonschema.SchemeURLLoader{})
		for _, name := range Names() {
			src, _ := Source(name)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
			if err != nil {
				compileErr = fmt.Errorf("embedded schema %s: %w", name, err)
				return
			}
			m, ok := doc.(map[string]any)
			if !ok {
				compileErr = fmt.Errorf("embedded schema %s is not an object", name)
				return
			}
			// Older copies carry the acs.org $id; register all under one base.
			m["$id"] = BaseURL + name
			if err := c.AddResource(BaseURL+name, m); err != nil {
				compileErr = fmt.Errorf("embedded schema %s: %w", name, err)
				return
			}
		}
		compiler = c
	})
	return compiler, compileErr
}

func schema(name string) (*jsonschema.Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if s, ok := compiled[name]; ok {
		return s, nil
	}
	path, _, _ := strings.Cut(name, "#")
	if _, err := Source(path); err != nil {
		return nil, err
	}
	s, err := c.Compile(BaseURL + name)
	if err != nil {
		return nil, fmt.Errorf("couldn't compile schema %s: %w", name, err)
	}
	compiled[name] = s
	return s, nil
}

// Error is a document that does not validate. Pointer names the failing
// place in the document (RFC 6901 JSON pointer, "" for the whole
// document); Keyword the schema keyword that failed, as a JSON pointer into
// the schema.
type Error struct {
	Schema  string
	Pointer string
	Keyword string
	Message string
	// Others lists the other leaf failures, for diagnostics.
	Others []Leaf
}

// Leaf is one failing keyword.
type Leaf struct {
	Pointer, Keyword, Message string
}

func (e *Error) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(document root)"
	}
	return fmt.Sprintf("%s: at %s: %s", e.Schema, p, e.Message)
}

// Validate checks doc against the schema name (a path from Names,
// optionally with a "#/$defs/..." fragment, or one of the constants
// above). doc is first parsed strictly (acs.Canonicalize): duplicate
// members, invalid UTF-8 and the like are refused before any schema runs.
// A document that parses but does not validate gets an *Error whose Pointer
// is the deepest failing place.
func Validate(name string, doc []byte) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	if _, err := acs.Canonicalize(doc); err != nil {
		return fmt.Errorf("%s: document is not acceptable JSON: %w", name, err)
	}
	v, err := Decode(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return validate(s, name, v)
}

// Decode decodes doc into the form ValidateValue takes: maps, slices,
// strings, bools, nil and json.Number, so that numbers keep every digit.
// It does not make the strict checks of acs.Canonicalize; a caller that
// has not already made them should use Validate instead.
func Decode(doc []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(doc))
}

// ValidateValue checks a value Decode returned (or any part of one)
// against the schema name, with the same *Error as Validate. It lets a
// caller that already parsed a document strictly and decoded it once
// validate it, and parts of it, without parsing again.
func ValidateValue(name string, v any) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	return validate(s, name, v)
}

func validate(s *jsonschema.Schema, name string, v any) error {
	err := s.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	leaves := collect(ve, nil)
	// The deepest failure is the most specific one; at equal depth the
	// first (schema order) wins.
	best := 0
	for i, l := range leaves {
		if depth(l.Pointer) > depth(leaves[best].Pointer) {
			best = i
		}
	}
	e := &Error{Schema: name, Pointer: leaves[best].Pointer, Keyword: leaves[best].Keyword, Message: leaves[best].Message}
	e.Others = append(leaves[:best:best], leaves[best+1:]...)
	return e
}

var printer = message.NewPrinter(language.English)

func collect(ve *jsonschema.ValidationError, out []Leaf) []Leaf {
	if len(ve.Causes) == 0 {
		out = append(out, Leaf{
			Pointer: pointer(ve.InstanceLocation),
			Keyword: keyword(ve),
			Message: ve.ErrorKind.LocalizedString(printer),
		})
		return out
	}
	for _, c := range ve.Causes {
		out = collect(c, out)
	}
	return out
}

func keyword(ve *jsonschema.ValidationError) string {
	_, frag, _ := strings.Cut(ve.SchemaURL, "#")
	kp := ve.ErrorKind.KeywordPath()
	if len(kp) == 0 {
		return frag
	}
	return frag + pointer(kp)
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

func depth(p string) int { return strings.Count(p, "/") }
