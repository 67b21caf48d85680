// Package plan is the store-independent half of an append: it validates
// records and, given the current state of the touched sessions, decides what
// every record becomes (a new chain entry, an idempotent replay or an error)
// and which rows and head moves a store must write.
package plan

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// Prepared is a record that passed validation.
type Prepared struct {
	// Index is the record's index in the caller's batch (0 for Append).
	Index int
	ledger.Record
	Entry *acs.Entry
	// Sign, when set, builds the signed response stored beside the entry
	// (StepRecorder.AppendRequest).
	Sign func(ledger.Appended) ([]byte, error)
	// Params, when set, are the request's params stored beside the entry
	// (StepRecorder.AppendRequest).
	Params []byte
	// Seen, when set, is the request's replay key, recorded in the same
	// transaction as the entry (StepRecorder.AppendRequest). The entry's
	// step_id already being stored is then a replay, not an idempotent
	// retry.
	Seen *ledger.Seen
}

// Prepare checks a record's identifiers and size and parses its entry.
func Prepare(index int, r ledger.Record, maxBytes int) (Prepared, error) {
	return PrepareParsed(index, r, nil, maxBytes)
}

// PrepareParsed is Prepare with the entry already parsed: e, when not nil,
// must be acs.ParseEntry(r.Entry).
func PrepareParsed(index int, r ledger.Record, e *acs.Entry, maxBytes int) (Prepared, error) {
	invalid := func(format string, args ...any) error {
		return &ledger.InvalidEntryError{Index: index, SessionID: r.SessionID, Err: fmt.Errorf(format, args...)}
	}
	if err := checkID("session id", r.SessionID, ledger.MaxSessionIDBytes, false); err != nil {
		return Prepared{}, invalid("%w", err)
	}
	if err := checkID("agent id", r.AgentID, ledger.MaxAgentIDBytes, true); err != nil {
		return Prepared{}, invalid("%w", err)
	}
	if len(r.Entry) > maxBytes {
		return Prepared{}, invalid("entry is %d bytes, over the %d-byte limit", len(r.Entry), maxBytes)
	}
	switch r.Writer {
	case "":
		r.Writer = ledger.WriterExternal
	case ledger.WriterExternal, ledger.WriterGuardian:
	default:
		return Prepared{}, invalid("writer %q is not %q or %q", r.Writer, ledger.WriterExternal, ledger.WriterGuardian)
	}
	if e == nil {
		var err error
		if e, err = acs.ParseEntry(r.Entry); err != nil {
			return Prepared{}, &ledger.InvalidEntryError{Index: index, SessionID: r.SessionID, Err: err}
		}
	}
	// The indexed members are stored as text columns, which in PostgreSQL
	// cannot hold NUL; refuse it in every store alike.
	for _, m := range []struct{ name, v string }{
		{"entry_id", e.EntryID}, {"step_id", e.StepID}, {"step_type", e.StepType}, {"timestamp", e.Timestamp},
	} {
		if i := strings.IndexByte(m.v, 0); i >= 0 {
			return Prepared{}, invalid("member %q has a NUL character at byte %d", m.name, i)
		}
	}
	return Prepared{Index: index, Record: r, Entry: e}, nil
}

func checkID(what, s string, max int, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%s is empty", what)
	case len(s) > max:
		return fmt.Errorf("%s is %d bytes, over the %d-byte limit", what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	for i, c := range s {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s has a control character at byte %d", what, i)
		}
	}
	return nil
}

// State is a stored session's identity, owner and head.
type State struct {
	AgentID string
	// Writer is the kind of writer that owns the session.
	Writer string
	Length int64
	Head   acs.Hash
}

// Key names an entry by session and step_id, the idempotency key.
type Key struct{ SessionID, StepID string }

// Stored is an entry already in the store, as needed to judge a retry.
type Stored struct {
	Position     int64
	EntryHash    acs.Hash
	PreviousHash *acs.Hash
	Content      []byte
}

// Row is an entry to insert.
type Row struct {
	SessionID    string
	Position     int64
	EntryHash    acs.Hash
	PreviousHash *acs.Hash
	Entry        *acs.Entry
}

// Move is a head compare-and-swap for one session: from (FromLength,
// FromHead) to (ToLength, ToHead). Created means the session does not exist
// yet and must be inserted (FromLength is 0).
type Move struct {
	SessionID string
	AgentID   string
	// Writer owns the session: stored, or the creating record's.
	Writer     string
	Created    bool
	FromLength int64
	FromHead   acs.Hash
	ToLength   int64
	ToHead     acs.Hash
}

// Plan is the outcome of Make.
type Plan struct {
	// Results and Errs are indexed like the prepared records; exactly one of
	// the two is set for each.
	Results []ledger.Appended
	Errs    []error
	// Signed holds the responses built by the signers of new entries,
	// indexed like Results; the store writes them beside the entries. A
	// replayed record's response is the store's to look up.
	Signed [][]byte
	// Params holds the request params of new entries, indexed like
	// Results; the store writes them beside the entries.
	Params [][]byte
	Rows   []Row
	Moves  []Move
}

// Failed returns the first error of the plan, or nil.
func (p *Plan) Failed() error {
	for _, err := range p.Errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// SessionIDs returns the distinct session ids of ps in first-seen order.
func SessionIDs(ps []Prepared) []string {
	seen := make(map[string]bool, len(ps))
	var ids []string
	for _, p := range ps {
		if !seen[p.SessionID] {
			seen[p.SessionID] = true
			ids = append(ids, p.SessionID)
		}
	}
	return ids
}

// Make chains ps onto the given state. sessions holds every touched session
// that exists; stored holds every already stored entry whose Key appears in
// ps. A record that fails does not advance its session; the records after it
// chain onto the last one that succeeded.
//
// Then Make runs the signers of the new entries. A signer that fails fails
// its record, and since later records of its session were chained onto it,
// the whole set is planned again without it (signers run again too).
func Make(ps []Prepared, sessions map[string]State, stored map[Key]Stored) *Plan {
	return MakeExcept(ps, sessions, stored, nil)
}

// MakeExcept is Make with some records failed before planning: refused
// maps their indexes in ps to their errors (the store's replay check, for
// one). It is not modified.
func MakeExcept(ps []Prepared, sessions map[string]State, stored map[Key]Stored, refused map[int]error) *Plan {
	failed := make(map[int]error, len(refused))
	for i, err := range refused {
		failed[i] = err
	}
	for {
		p := chain(ps, sessions, stored, failed)
		if sign(p, ps, failed) {
			return p
		}
	}
}

// sign runs the signers of p's new entries and reports whether all
// succeeded; failures are added to failed.
func sign(p *Plan, ps []Prepared, failed map[int]error) bool {
	ok := true
	for i, r := range ps {
		if p.Errs[i] != nil || p.Results[i].Replayed {
			continue
		}
		p.Params[i] = r.Params
		if r.Sign == nil {
			continue
		}
		b, err := r.Sign(p.Results[i])
		if err != nil {
			failed[i] = fmt.Errorf("couldn't sign the response for session %q position %d: %w", r.SessionID, p.Results[i].Position, err)
			ok = false
			continue
		}
		p.Signed[i] = b
	}
	return ok
}

func chain(ps []Prepared, sessions map[string]State, stored map[Key]Stored, failed map[int]error) *Plan {
	p := &Plan{Results: make([]ledger.Appended, len(ps)), Errs: make([]error, len(ps)), Signed: make([][]byte, len(ps)), Params: make([][]byte, len(ps))}
	moves := make(map[string]int) // session id -> index in p.Moves
	batch := make(map[Key]Stored)
	for i, r := range ps {
		mi, touched := moves[r.SessionID]
		if !touched {
			st, exists := sessions[r.SessionID]
			p.Moves = append(p.Moves, Move{
				SessionID: r.SessionID, AgentID: st.AgentID, Writer: st.Writer, Created: !exists,
				FromLength: st.Length, FromHead: st.Head, ToLength: st.Length, ToHead: st.Head,
			})
			if !exists {
				p.Moves[len(p.Moves)-1].AgentID = r.AgentID
				p.Moves[len(p.Moves)-1].Writer = r.Writer
			}
			mi = len(p.Moves) - 1
			moves[r.SessionID] = mi
		}
		m := &p.Moves[mi]
		if err := failed[i]; err != nil {
			p.Errs[i] = err
			continue
		}
		if r.AgentID != "" && r.AgentID != m.AgentID {
			p.Errs[i] = fmt.Errorf("entry %d for session %q: %w: session belongs to agent %q, record names %q",
				r.Index, r.SessionID, ledger.ErrAgentMismatch, m.AgentID, r.AgentID)
			continue
		}
		if r.Writer != m.Writer {
			p.Errs[i] = &ledger.WriterMismatchError{Index: r.Index, SessionID: r.SessionID, Writer: r.Writer, Owner: m.Writer}
			continue
		}
		key := Key{r.SessionID, r.Entry.StepID}
		old, ok := stored[key]
		if !ok {
			old, ok = batch[key]
		}
		if ok && r.Seen != nil {
			// The request's step is already chained: the request itself
			// is a replay (ACS §10.3).
			p.Errs[i] = ReplayError(r.SessionID, *r.Seen)
			continue
		}
		if ok {
			p.Results[i], p.Errs[i] = replay(r, old)
			continue
		}
		if r.Expect != nil {
			// The writer decided against *r.Expect; a different head is
			// never re-linked silently.
			actual := ledger.Head{Length: m.ToLength}
			if m.ToLength > 0 {
				actual.Hash = m.ToHead
			}
			if *r.Expect != actual {
				p.Errs[i] = &ledger.HeadMovedError{Index: r.Index, SessionID: r.SessionID, Expected: *r.Expect, Actual: actual}
				continue
			}
		}
		var prev *acs.Hash
		if m.ToLength > 0 {
			h := m.ToHead
			prev = &h
		}
		// ACS §8.2: the first entry hashes its content alone (prev is nil).
		sum := acs.EntryHash(r.Entry.Content, prev)
		if err := checkLinks(r, m.ToLength, sum, prev); err != nil {
			p.Errs[i] = err
			continue
		}
		row := Row{SessionID: r.SessionID, Position: m.ToLength, EntryHash: sum, PreviousHash: prev, Entry: r.Entry}
		p.Rows = append(p.Rows, row)
		batch[key] = Stored{Position: row.Position, EntryHash: sum, PreviousHash: prev, Content: r.Entry.Content}
		p.Results[i] = ledger.Appended{SessionID: r.SessionID, Position: row.Position, EntryHash: sum, PreviousHash: prev}
		m.ToLength++
		m.ToHead = sum
	}
	// Sessions whose every record failed move nowhere.
	kept := p.Moves[:0]
	for _, m := range p.Moves {
		if m.ToLength != m.FromLength {
			kept = append(kept, m)
		}
	}
	p.Moves = kept
	return p
}

// replay judges a record whose step_id the session already holds.
func replay(r Prepared, old Stored) (ledger.Appended, error) {
	if !bytes.Equal(old.Content, r.Entry.Content) {
		return ledger.Appended{}, &ledger.ConflictError{
			Index: r.Index, SessionID: r.SessionID, StepID: r.Entry.StepID,
			Position: old.Position, EntryHash: old.EntryHash,
		}
	}
	if err := checkLinks(r, old.Position, old.EntryHash, old.PreviousHash); err != nil {
		return ledger.Appended{}, err
	}
	return ledger.Appended{
		SessionID: r.SessionID, Position: old.Position,
		EntryHash: old.EntryHash, PreviousHash: old.PreviousHash, Replayed: true,
	}, nil
}

// checkLinks compares the submitted entry_hash and previous_hash, when
// present, with the ledger's values.
func checkLinks(r Prepared, pos int64, sum acs.Hash, prev *acs.Hash) error {
	mismatch := func(member string, want, got *acs.Hash) error {
		return &ledger.HashMismatchError{
			Index: r.Index, SessionID: r.SessionID, Position: pos,
			Member: member, Expected: want, Actual: got,
		}
	}
	// previous_hash first: when it is wrong, entry_hash is wrong too, and the
	// stale head is the more useful report.
	if got := r.Entry.PreviousHash; got != nil && (prev == nil || *got != *prev) {
		return mismatch("previous_hash", prev, got)
	}
	if got := r.Entry.EntryHash; got != nil && *got != sum {
		return mismatch("entry_hash", &sum, got)
	}
	return nil
}

// CheckBundle validates a policy bundle before it is stored: id and version
// present, and digest the lowercase hex SHA-256 of the content.
func CheckBundle(b ledger.PolicyBundle) error {
	if err := checkID("policy bundle id", b.ID, ledger.MaxSessionIDBytes, false); err != nil {
		return err
	}
	if err := checkID("policy bundle version", b.Version, ledger.MaxSessionIDBytes, false); err != nil {
		return err
	}
	want := acs.EntryHash(b.Content, nil).String() // plain SHA-256
	if b.Digest != want {
		return fmt.Errorf("policy bundle %s@%s: digest %q is not the SHA-256 of the content (%s)", b.ID, b.Version, b.Digest, want)
	}
	return nil
}

// ReplayError is the error of a request whose request_id or nonce its
// session has already seen.
func ReplayError(sessionID string, seen ledger.Seen) error {
	return fmt.Errorf("request %q (nonce %q) of session %q: %w", seen.RequestID, seen.Nonce, sessionID, ledger.ErrReplay)
}

// CheckRequest validates the identifiers RecordRequest stores.
func CheckRequest(sessionID, requestID, nonce string) error {
	if err := checkID("session id", sessionID, ledger.MaxSessionIDBytes, false); err != nil {
		return err
	}
	if err := checkID("request id", requestID, ledger.MaxSessionIDBytes, false); err != nil {
		return err
	}
	return checkID("nonce", nonce, ledger.MaxSessionIDBytes, true)
}
