package verify

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/trace"
)

// Finding codes of the events check (VerifyEvents).
const (
	// CodeEventMismatch: an exported event does not say what the ledger
	// holds: its entry hash is not the ledger's at its position, the
	// ledger has no entry there, or a member differs from the event the
	// ledger's entry encodes to.
	CodeEventMismatch = "event_mismatch"

	// CodeEventMissing: an entry of the bundle (or, for OCSF, the
	// Detection Finding of its decision) is not in the copy.
	CodeEventMissing = "event_missing"

	// CodeEventOutsideBundle (a notice): an event names a session no
	// bundle given covers, so it was not checked.
	CodeEventOutsideBundle = "event_outside_bundle"

	// CodeEventIntegrityMismatch: an OCSF 1.9 event's integrity members do
	// not match the bundle: it has no record_integrity attestation, the
	// attestation's fingerprint is not the entry hash, its uid or the
	// handle's leaf_index is not the entry's leaf, its chain_uid not the
	// session, its receipt path not the entry's, or its checkpoint does
	// not cover the leaf or differs from the bundle's checkpoint of that
	// origin and size.
	CodeEventIntegrityMismatch = "event_integrity_mismatch"

	// CodeEventCheckpointUnchecked (a notice): events name a covering
	// checkpoint the bundle does not hold (another size), so its root hash
	// was not compared.
	CodeEventCheckpointUnchecked = "event_checkpoint_unchecked"
)

// EventResult is what the events check found for one event of the copy.
type EventResult struct {
	Line      int    `json:"line"` // 1-based line of the events file
	Format    string `json:"format"`
	SessionID string `json:"session_id"`
	Position  int64  `json:"position"`
	EntryHash string `json:"entry_hash"`
	Finding   bool   `json:"detection_finding,omitempty"`
	// Status is "verified" (the entry hash is the ledger's and the event
	// says what the entry does), "mismatch", or "outside_bundle".
	Status string `json:"status"`
	// Member names the first member that differs, for a mismatch found by
	// re-encoding.
	Member string `json:"member,omitempty"`
}

// EventsReport is the outcome of checking a copy of exported events.
type EventsReport struct {
	// Bundles are the reports of the bundles themselves: the copy is only
	// as good as the evidence it is checked against.
	Bundles []*Report
	// Events holds each event's result, in the order of the copy, unless
	// VerifyEventsFunc was given a function to hand them to instead.
	Events []EventResult
	// Findings are the events' findings (event_mismatch, event_missing);
	// EntryIndex is the entry's position in its session's chain.
	Findings []Finding
	Notices  []Finding
	// Duplicates counts events delivered more than once (at-least-once
	// delivery allows them).
	Duplicates int
}

// Verified reports whether every bundle verified, no event differs from
// the ledger and none is missing.
func (r *EventsReport) Verified() bool {
	for _, b := range r.Bundles {
		if !b.Verified() {
			return false
		}
	}
	return len(r.Findings) == 0
}

// eventsBundle is what the events check reads of one bundle.
type eventsBundle struct {
	session   string
	origin    string
	entries   []json.RawMessage
	ids       []acs.EntryHead
	hashes    []string
	responses map[string]json.RawMessage // by result.request_id
	leaves    map[int64]uint64           // position -> leaf index
	// checkpoints are the bundle's checkpoints (VerifyBundle checked
	// their signatures), for the checkpoint an OCSF 1.9 event names.
	checkpoints []Checkpoint
	// unchecked counts events whose checkpoint the bundle does not hold;
	// uncheckedLine is the first one's line.
	unchecked, uncheckedLine int
	seen                     []bool
	seenFind                 []bool
	differs                  []bool // an event of the entry was an event_mismatch
	// delivered and deliveredFind count the copy's events per position,
	// for duplicates.
	delivered, deliveredFind []bool
	wantFind                 []bool
}

// VerifyEvents checks a copy of exported events (one JSON event per line,
// bare or as the pull API's {cursor, event} lines, in any of the trace
// formats) against evidence bundles: each bundle is verified as
// VerifyBundle does, then each event's evidence handle must name the
// ledger's entry hash at its session and position, and the event must be
// what the entry encodes to (trace.Parsed.Compare); then every entry of
// each bundle must have its event. Blank lines and the pull API's
// heartbeat lines are skipped. An event line
// that cannot be parsed is an *InputError naming the line.
func VerifyEvents(bundles [][]byte, events io.Reader, trust *Trust) (*EventsReport, error) {
	return VerifyEventsFunc(bundles, events, trust, nil)
}

// VerifyEventsFunc is VerifyEvents handing each event's result to each as
// it is found rather than keeping it in the report, so that a copy of any
// length is checked in memory bounded by the bundles. Events of sessions no
// bundle covers give one notice per session.
func VerifyEventsFunc(bundles [][]byte, events io.Reader, trust *Trust, each func(EventResult)) (*EventsReport, error) {
	rep := &EventsReport{}
	emit := func(r EventResult) {
		if each != nil {
			each(r)
		} else {
			rep.Events = append(rep.Events, r)
		}
	}
	type outsider struct {
		session   string
		line, n   int
		entryHash string
	}
	var outside []*outsider
	outsideByID := map[string]*outsider{}
	byID := map[string]*eventsBundle{}
	for i, b := range bundles {
		br, err := VerifyBundle(bytes.NewReader(b), trust)
		if err != nil {
			return nil, fmt.Errorf("bundle %d: %w", i+1, err)
		}
		rep.Bundles = append(rep.Bundles, br)
		eb, err := readEventsBundle(b)
		if err != nil {
			return nil, fmt.Errorf("bundle %d: %w", i+1, err)
		}
		if br.Checkpoint != nil {
			eb.origin = br.Checkpoint.Origin
		}
		if _, dup := byID[eb.session]; dup {
			return nil, fmt.Errorf("bundle %d: a second bundle of session %s", i+1, eb.session)
		}
		byID[eb.session] = eb
	}

	rd := bufio.NewReaderSize(events, 64<<10)
	for line := 1; ; line++ {
		raw, err := readLine(rd)
		if err == io.EOF && raw == nil {
			break
		}
		if err != nil && err != io.EOF {
			return nil, &InputError{Line: line, Err: err}
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			if err == io.EOF {
				break
			}
			continue
		}
		p, perr := trace.Parse(raw)
		if perr != nil {
			return nil, &InputError{Line: line, Err: perr}
		}
		if p.Progress {
			// A heartbeat of the pull API's follow stream, saved with
			// the events.
			if err == io.EOF {
				break
			}
			continue
		}
		res := EventResult{Line: line, Format: string(p.Format), SessionID: p.Handle.SessionID, Position: p.Handle.Position,
			EntryHash: p.Handle.EntryHash, Finding: p.Finding}
		eb := byID[p.Handle.SessionID]
		if eb == nil {
			res.Status = "outside_bundle"
			o := outsideByID[p.Handle.SessionID]
			if o == nil {
				o = &outsider{session: p.Handle.SessionID, line: line, entryHash: p.Handle.EntryHash}
				outsideByID[o.session] = o
				outside = append(outside, o)
			}
			o.n++
			emit(res)
			continue
		}
		if pos := p.Handle.Position; pos < int64(len(eb.entries)) {
			d := eb.delivered
			if p.Finding {
				d = eb.deliveredFind
			}
			if d[pos] {
				rep.Duplicates++
			}
			d[pos] = true
		}
		res.Status = "mismatch"
		if f, member := eb.check(p, line); f != nil {
			res.Member = member
			rep.Findings = append(rep.Findings, *f)
		} else {
			res.Status = "verified"
		}
		emit(res)
		if err == io.EOF {
			break
		}
	}
	for _, o := range outside {
		rep.Notices = append(rep.Notices, Finding{Code: CodeEventOutsideBundle, EntryIndex: -1,
			Where: fmt.Sprintf("event line %d", o.line), Actual: o.entryHash,
			Message: fmt.Sprintf("%d event(s) name session %s, which no bundle given covers (the first at line %d); they were not checked", o.n, o.session, o.line)})
	}

	for _, eb := range sortedBundles(byID) {
		if eb.unchecked > 0 {
			rep.Notices = append(rep.Notices, Finding{Code: CodeEventCheckpointUnchecked, EntryIndex: -1,
				Where: fmt.Sprintf("event line %d", eb.uncheckedLine),
				Message: fmt.Sprintf("%d event(s) of session %s name a checkpoint the bundle does not hold (another tree size), the first at line %d: its root hash was not compared (its origin and that it covers the leaf were)",
					eb.unchecked, eb.session, eb.uncheckedLine)})
		}
		for i := range eb.entries {
			f := Finding{Code: CodeEventMissing, EntryIndex: i, EntryID: eb.ids[i].EntryID, StepID: eb.ids[i].StepID,
				Expected: eb.hashes[i], Where: "session " + eb.session}
			switch {
			case !eb.seen[i] && eb.differs[i]:
				f.Message = fmt.Sprintf("the copy has no event of entry %d of session %s that matches the ledger, only one that differs (event_mismatch or event_integrity_mismatch)", i, eb.session)
				rep.Findings = append(rep.Findings, f)
			case !eb.seen[i]:
				f.Message = fmt.Sprintf("the copy has no event of entry %d of session %s", i, eb.session)
				rep.Findings = append(rep.Findings, f)
			case eb.wantFind[i] && !eb.seenFind[i]:
				f.Message = fmt.Sprintf("the copy has the OCSF event of entry %d of session %s but not the Detection Finding of its decision", i, eb.session)
				rep.Findings = append(rep.Findings, f)
			}
		}
	}
	return rep, nil
}

func sortedBundles(m map[string]*eventsBundle) []*eventsBundle {
	out := make([]*eventsBundle, 0, len(m))
	for _, b := range m {
		out = append(out, b)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].session < out[j-1].session; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// check returns the finding about event p (read at line), or nil when it
// says what the ledger holds, and the member that differs.
func (eb *eventsBundle) check(p *trace.Parsed, line int) (*Finding, string) {
	where := fmt.Sprintf("event line %d", line)
	pos := p.Handle.Position
	if pos >= int64(len(eb.entries)) {
		return &Finding{Code: CodeEventMismatch, EntryIndex: -1, Where: where, Actual: p.Handle.EntryHash,
			Message: fmt.Sprintf("the ledger's session %s has %d entries, none at position %d", eb.session, len(eb.entries), pos)}, ""
	}
	i := int(pos)
	differed := eb.differs[i]
	eb.differs[i] = true // until the event is found to match
	f := &Finding{Code: CodeEventMismatch, EntryIndex: i, EntryID: eb.ids[i].EntryID, StepID: eb.ids[i].StepID,
		Where: where, Expected: eb.hashes[i], Actual: p.Handle.EntryHash}
	if p.Handle.EntryHash != eb.hashes[i] {
		f.Message = fmt.Sprintf("the event's entry hash is not the ledger's at session %s position %d", eb.session, pos)
		return f, "entry_hash"
	}
	if p.Format == trace.OCSF {
		if f, member := eb.checkIntegrity(p, i, line); f != nil {
			return f, member
		}
	}
	ev := p.Context()
	ev.Entry = eb.entries[i]
	switch ev.Source {
	case "", "guardian", "acs":
		// The sources whose entries name none (source_format): the
		// Guardian's own and ingested ACS traffic. Any other source an
		// event states must be the entry's.
	default:
		ev.Source = ""
	}
	if p.Handle.LeafIndex != nil {
		if li, ok := eb.leaves[pos]; ok {
			ev.LeafIndex = &li
		}
	}
	if eb.origin != "" && ev.Origin != "" {
		ev.Origin = eb.origin
	}
	ev.Response = eb.responses[eb.ids[i].StepID]
	if ev.Response == nil {
		// The bundle holds no response for the step: the event's, if any,
		// is taken as it is (acsverify bundle checks the responses a
		// bundle holds).
		ev.Response = p.Response()
	}
	member, want, got, err := p.CompareValues(ev)
	if err != nil {
		f.Message = fmt.Sprintf("the ledger's entry could not be encoded: %v", err)
		return f, ""
	}
	if member != "" {
		f.Message = fmt.Sprintf("the %s event differs from the ledger's entry at %s (expected and actual are that member's values)", p.Format, member)
		f.Expected, f.Actual = want, got
		return f, member
	}
	eb.differs[i] = differed
	if p.Finding {
		eb.seenFind[i] = true
	} else {
		eb.seen[i] = true
		if p.Format.IsOCSF() {
			evs, err := trace.EncodeAll(p.Format, ev, trace.Options{})
			eb.wantFind[i] = err == nil && len(evs) > 1
		}
	}
	return nil, ""
}

// checkIntegrity holds the record_integrity members of OCSF 1.9 event p,
// of entry i, against the bundle (docs/export.md, "Record integrity"): the
// attestation's fingerprint must be the entry hash the chain gives, its
// uid and the handle's leaf_index the leaf the bundle anchors the entry
// at, its chain_uid the session, the receipt path the entry's, and a
// checkpoint the event names must cover the leaf and, when the bundle
// holds a checkpoint of its origin and size, have its root hash. The
// event's entry hash was found to be the ledger's before.
func (eb *eventsBundle) checkIntegrity(p *trace.Parsed, i, line int) (*Finding, string) {
	f := &Finding{Code: CodeEventIntegrityMismatch, EntryIndex: i, EntryID: eb.ids[i].EntryID, StepID: eb.ids[i].StepID,
		Where: fmt.Sprintf("event line %d", line)}
	bad := func(member, want, got, msg string) (*Finding, string) {
		f.Expected, f.Actual = want, got
		f.Message = fmt.Sprintf("the event's record integrity does not match the bundle at %s: %s", member, msg)
		return f, member
	}
	list, profiled, err := p.Integrity()
	switch {
	case err != nil:
		return bad("attestation_list", "", "", err.Error())
	case len(list) == 0:
		return bad("attestation_list", "", "", "an OCSF "+trace.OCSFVersion+" event without its attestation")
	case !profiled:
		return bad("metadata.profiles", `"record_integrity"`, "", "the event carries an attestation but does not name the record_integrity profile")
	case len(list) != 1:
		return bad("attestation_list", "1", strconv.Itoa(len(list)), "acsledger writes one attestation per event")
	}
	a := list[0]
	if a.FingerprintAlgorithmID != 3 {
		return bad("attestation_list[0].fingerprint.algorithm_id", "3", strconv.FormatInt(a.FingerprintAlgorithmID, 10), "the entry hash is SHA-256 (3)")
	}
	if a.Fingerprint != eb.hashes[i] {
		return bad("attestation_list[0].fingerprint.value", eb.hashes[i], a.Fingerprint, "the fingerprint is not the entry hash the chain gives")
	}
	if a.ChainUID != eb.session {
		return bad("attestation_list[0].chain_uid", eb.session, a.ChainUID, "the chain is the session")
	}
	pos := int64(i)
	leaf, anchored := eb.leaves[pos]
	if h := p.Handle.LeafIndex; h != nil {
		if anchored && *h != leaf {
			return bad("unmapped.acsledger.leaf_index", strconv.FormatUint(leaf, 10), strconv.FormatUint(*h, 10), "not the leaf the bundle anchors the entry at")
		}
		if !anchored {
			leaf, anchored = *h, true // unchecked here; the checkpoint must still cover it
		}
	}
	if a.UID != "" || anchored {
		want := ""
		if anchored {
			want = strconv.FormatUint(leaf, 10)
		}
		if a.UID != want {
			return bad("attestation_list[0].uid", want, a.UID, "the attestation's uid is the entry's leaf index")
		}
	}
	if want := trace.ReceiptPath(eb.session, pos); p.Handle.Receipt != want {
		return bad("unmapped.acsledger.receipt", want, p.Handle.Receipt, "not the path of the entry's receipt")
	}
	cp := p.Handle.Checkpoint
	if cp == nil {
		return nil, ""
	}
	if anchored && cp.Size <= leaf {
		return bad("unmapped.acsledger.checkpoint.size", "more than "+strconv.FormatUint(leaf, 10), strconv.FormatUint(cp.Size, 10), "the checkpoint does not cover the entry's leaf")
	}
	if eb.origin != "" && cp.Origin != eb.origin {
		return bad("unmapped.acsledger.checkpoint.origin", eb.origin, cp.Origin, "not the bundle's log")
	}
	for _, c := range eb.checkpoints {
		if c.Origin == cp.Origin && c.Size == cp.Size {
			if root := hex.EncodeToString(c.Root[:]); cp.RootHash != root {
				return bad("unmapped.acsledger.checkpoint.root_hash", root, cp.RootHash, "not the root hash of the bundle's checkpoint of that size")
			}
			return nil, ""
		}
	}
	if eb.unchecked == 0 {
		eb.uncheckedLine = line
	}
	eb.unchecked++
	return nil, ""
}

// readEventsBundle decodes the members of a bundle the events check needs.
// VerifyBundle has read it first, so its shape is known to be sound.
func readEventsBundle(b []byte) (*eventsBundle, error) {
	var in struct {
		SessionID   string            `json:"session_id"`
		Checkpoints []string          `json:"checkpoints"`
		Anchors     []json.RawMessage `json:"anchors"`
		Responses   []json.RawMessage `json:"responses"`
		Entries     []json.RawMessage `json:"entries"`
		Steps       []struct {
			Entry    json.RawMessage `json:"entry"`
			Response json.RawMessage `json:"response"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	eb := &eventsBundle{session: in.SessionID, responses: map[string]json.RawMessage{}, leaves: map[int64]uint64{}}
	addResponse := func(r json.RawMessage) {
		if len(r) == 0 || string(r) == "null" {
			return
		}
		var env struct {
			Result struct {
				RequestID string `json:"request_id"`
			} `json:"result"`
		}
		if json.Unmarshal(r, &env) == nil && env.Result.RequestID != "" {
			eb.responses[env.Result.RequestID] = r
		}
	}
	for _, r := range in.Responses {
		addResponse(r)
	}
	eb.entries = in.Entries
	for _, s := range in.Steps {
		eb.entries = append(eb.entries, s.Entry)
		addResponse(s.Response)
	}
	for _, a := range in.Anchors {
		var an struct {
			Position  int64  `json:"position"`
			LeafIndex uint64 `json:"leaf_index"`
		}
		if json.Unmarshal(a, &an) == nil {
			eb.leaves[an.Position] = an.LeafIndex
		}
	}
	for _, note := range in.Checkpoints {
		// The note's text is what precedes the blank line before its
		// signatures (c2sp.org/signed-note).
		text, _, _ := strings.Cut(note, "\n\n")
		if c, err := ParseCheckpointHead([]byte(text + "\n")); err == nil {
			eb.checkpoints = append(eb.checkpoints, c)
		}
	}
	var prev *acs.Hash
	for i, raw := range eb.entries {
		e, err := acs.ParseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		h := acs.EntryHash(e.Content, prev)
		prev = &h
		eb.hashes = append(eb.hashes, h.String())
		eb.ids = append(eb.ids, acs.EntryHead{EntryID: e.EntryID, StepID: e.StepID, StepType: e.StepType})
	}
	n := len(eb.entries)
	eb.seen, eb.seenFind, eb.wantFind, eb.differs = make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
	eb.delivered, eb.deliveredFind = make([]bool, n), make([]bool, n)
	return eb, nil
}

// readLine reads one line without its line break, up to MaxLineBytes.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineBytes {
			return nil, errors.New("line longer than " + strconv.Itoa(MaxLineBytes) + " bytes")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return nil, io.EOF
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}
