package acs

// TEMPORARY implementation so that other packages compile while the real
// single-pass canonicalizer is written. Replace, keeping the signatures.

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonicalize parses in strictly (no duplicate members, valid UTF-8, no lone
// surrogates, no trailing data, numbers within IEEE 754 double range) and
// returns its RFC 8785 canonical form.
func Canonicalize(in []byte) ([]byte, error) {
	return jcs.Transform(in)
}

// ParseEntry parses one ContextEntry JSON object strictly and returns it
// split per ACS §8.2. The error names the offending member or byte offset.
func ParseEntry(in []byte) (*Entry, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(in, &m); err != nil {
		return nil, fmt.Errorf("context entry: %w", err)
	}
	e := &Entry{}
	str := func(name string, dst *string, required bool) error {
		raw, ok := m[name]
		if !ok {
			if required {
				return fmt.Errorf("context entry: missing required member %q", name)
			}
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("context entry: member %q must be a string", name)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		d *string
		r bool
	}{{"entry_id", &e.EntryID, true}, {"step_id", &e.StepID, true}, {"step_type", &e.StepType, true}, {"timestamp", &e.Timestamp, false}} {
		if err := str(f.n, f.d, f.r); err != nil {
			return nil, err
		}
	}
	link := func(name string) (*Hash, error) {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("context entry: member %q must be a string or null", name)
		}
		h, err := ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("context entry: member %q: %w", name, err)
		}
		return &h, nil
	}
	var err error
	if e.EntryHash, err = link("entry_hash"); err != nil {
		return nil, err
	}
	if e.PreviousHash, err = link("previous_hash"); err != nil {
		return nil, err
	}
	delete(m, "entry_hash")
	delete(m, "previous_hash")
	b, _ := json.Marshal(m)
	if e.Content, err = jcs.Transform(b); err != nil {
		return nil, err
	}
	return e, nil
}

// RequestHash computes request_hash (ACS §8.1, DESIGN.md): the SHA-256 of
// the JCS form of a request's params exactly as received, signature included.
func RequestHash(params []byte) (Hash, error) {
	c, err := Canonicalize(params)
	if err != nil {
		return Hash{}, fmt.Errorf("request params: %w", err)
	}
	return EntryHash(c, nil), nil
}
