package acs

import (
	"bytes"
	"fmt"
)

// EntryHead holds the members a ContextEntry starts with (ACS §8.1), in the
// order the Guardian and ingest write them: the entries they write embed it,
// so encoding/json puts these members first.
type EntryHead struct {
	EntryID     string `json:"entry_id"`
	StepID      string `json:"step_id"`
	StepType    string `json:"step_type"`
	Timestamp   string `json:"timestamp"`
	RequestHash string `json:"request_hash"`
}

// Entry is a ContextEntry (ACS §8.1) parsed strictly and split into the part
// the chain commits to and the chain links themselves.
type Entry struct {
	// Content is the UTF-8 RFC 8785 form of the entry with its top-level
	// entry_hash and previous_hash members removed: the content_bytes of
	// ACS §8.2. Every other member is kept, so an absent member and a null
	// one hash differently.
	Content []byte

	// Required members (ACS §8.1), copied out for indexing.
	EntryID  string
	StepID   string
	StepType string

	// Timestamp is the entry's timestamp member, or "" when absent.
	Timestamp string

	// EntryHash and PreviousHash are the submitted chain links, nil when the
	// member is absent or null. They are never trusted: the ledger and the
	// verifier recompute and compare.
	EntryHash    *Hash
	PreviousHash *Hash
}

// ParseEntry parses one ContextEntry JSON object strictly, in one pass, and
// splits it per ACS §8.2: Content is the RFC 8785 form of the entry without
// its top-level entry_hash and previous_hash members, and the identifying
// members and chain links are copied out.
//
// Every refusal of Canonicalize applies (the error wraps a *JSONError naming
// the byte offset). ParseEntry also refuses a value that is not an object,
// a missing or non-string entry_id, step_id or step_type, a non-string
// timestamp, an entry_hash that is neither null, "" nor 64 lowercase hex
// characters (null and "" both state none), a previous_hash that is neither
// null nor 64 lowercase hex characters, and a request_hash that is not 64 lowercase hex
// characters. Each error names the member.
func ParseEntry(in []byte) (*Entry, error) {
	if i := skipSpace(in, 0); i < len(in) && in[i] != '{' {
		if kind := JSONKind(in[i]); kind != "" {
			return nil, fmt.Errorf("context entry must be a JSON object, got %s", kind)
		}
	}
	e := newEncoder(in)
	defer e.release()
	e.entry = &e.fields
	e.fields = entryFields{buf: e.fields.buf[:0]}
	f := &e.fields
	if err := e.run(); err != nil {
		return nil, fmt.Errorf("context entry: %w", err)
	}

	for _, id := range []field{fieldEntryID, fieldStepID, fieldStepType} {
		if f.kind[id] == 0 {
			return nil, fmt.Errorf("context entry: missing required member %q", fieldNames[id])
		}
	}
	for id := fieldEntryID; id < numFields; id++ {
		k := f.kind[id]
		if k == 0 {
			continue
		}
		nullable := id == fieldEntryHash || id == fieldPreviousHash
		if k != '"' && !(nullable && k == 'n') {
			want := "a string"
			if nullable {
				want = "a string or null"
			}
			return nil, fmt.Errorf("context entry: member %q at byte %d must be %s, got %s",
				fieldNames[id], f.off[id], want, JSONKind(k))
		}
	}

	box := new(struct {
		entry Entry
		links [2]Hash
	})
	ent := &box.entry
	for i, id := range []field{fieldEntryHash, fieldPreviousHash, fieldRequestHash} {
		if f.kind[id] != '"' {
			continue
		}
		if id == fieldEntryHash && len(f.value(id)) == 0 {
			// Writers commonly send "entry_hash": "" before hashing; like
			// null, it states no hash (the reference implementation reads
			// it so too). The member is not content either way.
			continue
		}
		h, err := parseHash(f.value(id))
		if err != nil {
			return nil, fmt.Errorf("context entry: member %q at byte %d: %w", fieldNames[id], f.off[id], err)
		}
		switch i {
		case 0:
			box.links[0] = h
			ent.EntryHash = &box.links[0]
		case 1:
			box.links[1] = h
			ent.PreviousHash = &box.links[1]
		}
	}

	// One allocation backs all the copied-out strings.
	all := string(f.buf)
	str := func(id field) string { return all[f.val[id][0]:f.val[id][1]] }
	ent.EntryID = str(fieldEntryID)
	ent.StepID = str(fieldStepID)
	ent.StepType = str(fieldStepType)
	ent.Timestamp = str(fieldTimestamp)
	ent.Content = bytes.Clone(e.out)
	return ent, nil
}

// field names a top-level ContextEntry member ParseEntry looks at.
type field uint8

const (
	fieldNone field = iota
	fieldEntryID
	fieldStepID
	fieldStepType
	fieldTimestamp
	fieldEntryHash
	fieldPreviousHash
	fieldRequestHash
	numFields
)

var fieldNames = [numFields]string{
	fieldEntryID:      "entry_id",
	fieldStepID:       "step_id",
	fieldStepType:     "step_type",
	fieldTimestamp:    "timestamp",
	fieldEntryHash:    "entry_hash",
	fieldPreviousHash: "previous_hash",
	fieldRequestHash:  "request_hash",
}

func lookupField(name []byte) field {
	switch string(name) {
	case "entry_id":
		return fieldEntryID
	case "step_id":
		return fieldStepID
	case "step_type":
		return fieldStepType
	case "timestamp":
		return fieldTimestamp
	case "entry_hash":
		return fieldEntryHash
	case "previous_hash":
		return fieldPreviousHash
	case "request_hash":
		return fieldRequestHash
	}
	return fieldNone
}

// entryFields collects the top-level members ParseEntry copies out, while
// the encoder writes the entry's canonical form.
type entryFields struct {
	kind [numFields]byte   // first byte of the canonical value; 0 if absent
	off  [numFields]int    // input offset of the member name
	val  [numFields][2]int // decoded string value, as buf[val[0]:val[1]]
	buf  []byte
}

// capture records member f, whose canonical value is v.
func (f *entryFields) capture(id field, off int, v []byte) {
	f.kind[id], f.off[id] = v[0], off
	if v[0] == '"' {
		n := len(f.buf)
		if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 {
			f.buf = append(f.buf, s...)
		} else {
			f.buf = appendUnescaped(f.buf, s)
		}
		f.val[id] = [2]int{n, len(f.buf)}
	}
}

func (f *entryFields) value(id field) []byte { return f.buf[f.val[id][0]:f.val[id][1]] }

// JSONKind names the JSON type of a value from its first byte ("object",
// "array", "string", "boolean", "null" or "number"), or "" if no value
// starts with c.
func JSONKind(c byte) string {
	switch {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || '0' <= c && c <= '9':
		return "number"
	}
	return ""
}
