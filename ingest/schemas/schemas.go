// Package schemas embeds the JSON Schemas of the records ingest reads (A2H
// v0.2 and v0.3, bash-guard decision output v1 in the seed's form and the
// two published ones beside it; see SOURCES.md) and validates documents
// against them.
package schemas

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed a2h/v0.2/*.json a2h/v0.3/*.json bashguard/*.json
var files embed.FS

// base is where the embedded files are registered: the published $ids are
// not unique (both bash-guard copies share one) and nothing is fetched.
const base = "urn:acsledger:ingest:"

// Names of the schemas validated against.
const (
	A2HResponseV02     = "a2h/v0.2/response.schema.json"
	A2HResponseV03     = "a2h/v0.3/response.schema.json"
	BashGuardV1Base    = "bashguard/decision-output.v1.base.json"
	BashGuardV1Seed    = "bashguard/decision-output.v1.seed.json"
	BashGuardV1Unlock  = "bashguard/decision-output.v1.unlock.json"
	a2hPublishedPrefix = "https://a2hprotocol.org/schema/"
)

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	loadErr  error
)

func load() (map[string]*jsonschema.Schema, error) {
	once.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		c.UseLoader(jsonschema.SchemeURLLoader{})
		var names []string
		err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, _ := files.ReadFile(p)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				return fmt.Errorf("embedded schema %s: %w", p, err)
			}
			m, ok := doc.(map[string]any)
			if !ok {
				return fmt.Errorf("embedded schema %s is not an object", p)
			}
			m["$id"] = base + p
			if err := c.AddResource(base+p, m); err != nil {
				return fmt.Errorf("embedded schema %s: %w", p, err)
			}
			// A2H's get-message schema refers to its siblings by their
			// published $id: register those too, from the same bytes.
			if strings.HasPrefix(p, "a2h/") {
				m2, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
				url := a2hPublishedPrefix + strings.TrimPrefix(p, "a2h/")
				if err := c.AddResource(url, m2); err != nil {
					return fmt.Errorf("embedded schema %s: %w", p, err)
				}
			}
			names = append(names, p)
			return nil
		})
		if err != nil {
			loadErr = err
			return
		}
		compiled = make(map[string]*jsonschema.Schema)
		for _, n := range names {
			s, err := c.Compile(base + n)
			if err != nil {
				loadErr = fmt.Errorf("couldn't compile %s: %w", n, err)
				return
			}
			compiled[n] = s
		}
	})
	return compiled, loadErr
}

// Validate checks a decoded JSON document (as jsonschema.UnmarshalJSON
// returns it) against the schema name, a path such as A2HResponseV03.
func Validate(name string, doc any) error {
	ss, err := load()
	if err != nil {
		return err
	}
	s, ok := ss[name]
	if !ok {
		return fmt.Errorf("no embedded schema %q", name)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%s: %s", name, leaf(err))
	}
	return nil
}

var printer = message.NewPrinter(language.English)

// leaf returns the deepest failure of a validation error, the one that
// names the offending member.
func leaf(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := "/" + strings.Join(ve.InstanceLocation, "/")
	return fmt.Sprintf("at %s: %s", loc, ve.ErrorKind.LocalizedString(printer))
}

// Decode parses JSON for Validate, keeping numbers exact.
func Decode(b []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}
