package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
)

// Payloads are what the ledger keeps beside an entry, committed to by a
// hash the entry holds (docs/evidence-bundle.md, "Payloads"): a Guardian
// step's request params (request_hash, ACS §8.1) and an ingested record's
// exact source bytes (source_sha256).
const (
	PayloadParams = "params"
	PayloadSource = "source"
)

// PayloadErasure is one element of a step's "erased": the record of a
// payload's erasure, as the ledger wrote it when it deleted the payload.
type PayloadErasure struct {
	Payload  string    `json:"payload"`
	ErasedAt time.Time `json:"erased_at"`
	Reason   string    `json:"reason"`
	ErasedBy string    `json:"erased_by"`
}

// stepPayloads are the payload members of one element of "steps".
type stepPayloads struct {
	source, params []byte // nil when absent
	erased         []PayloadErasure
	missing        []string
}

func (p *stepPayloads) reset() {
	p.source, p.params, p.erased, p.missing = nil, nil, p.erased[:0], p.missing[:0]
}

// readPayloadMember reads the step member name into p, if it is one of
// the payload members; ok is false for any other name.
func (p *stepPayloads) readPayloadMember(vr *valueReader, name string) (ok bool, err error) {
	switch name {
	case "source", "params":
		raw, err := vr.value()
		if err != nil {
			return true, err
		}
		var b []byte
		if err := json.Unmarshal(raw, &b); err != nil {
			return true, fmt.Errorf("%s: not a base64 string: %v", name, err)
		}
		if b == nil {
			b = []byte{}
		}
		if name == "source" {
			p.source = b
		} else {
			p.params = b
		}
	case "erased":
		var es []PayloadErasure
		if err := decodeStrict(vr, &es); err != nil {
			return true, fmt.Errorf("erased: %w", err)
		}
		for k, e := range es {
			if e.Payload != PayloadParams && e.Payload != PayloadSource {
				return true, fmt.Errorf("erased[%d]: payload %q is neither %q nor %q", k, e.Payload, PayloadParams, PayloadSource)
			}
		}
		p.erased = append(p.erased, es...)
	case "missing":
		var ms []string
		if err := decodeStrict(vr, &ms); err != nil {
			return true, fmt.Errorf("missing: %w", err)
		}
		for k, m := range ms {
			if m != PayloadParams && m != PayloadSource {
				return true, fmt.Errorf("missing[%d]: %q is neither %q nor %q", k, m, PayloadParams, PayloadSource)
			}
		}
		p.missing = append(p.missing, ms...)
	default:
		return false, nil
	}
	return true, nil
}

func (p *stepPayloads) erasure(kind string) *PayloadErasure {
	for k := range p.erased {
		if p.erased[k].Payload == kind {
			return &p.erased[k]
		}
	}
	return nil
}

// checkPayloads checks the payloads a step carries against the hashes its
// entry holds: each payload present must hash to its commitment; an erased
// one is a notice with its erasure record, never a failure; a source the
// entry commits to that is neither carried nor erased, and a payload the
// bundle's maker lists as missing, are payload_missing.
func (s *bundleState) checkPayloads(i int, e *acs.Entry, p *stepPayloads) {
	finding := func(code, expected, actual, msg string) Finding {
		return Finding{Code: code, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID, Expected: expected, Actual: actual,
			Where: fmt.Sprintf("steps[%d]", i), Message: msg}
	}
	commit, hasCommit := sourceCommitment(e)
	switch {
	case p.source != nil && !hasCommit:
		s.findings = append(s.findings, finding(CodePayloadMismatch, "", sha256Hex(p.source), PayloadMismatchNoCommitment))
	case p.source != nil:
		if got := sha256Hex(p.source); got != commit {
			s.findings = append(s.findings, finding(CodePayloadMismatch, commit, got,
				"The source record the step carries does not hash to the entry's source_sha256: it is not the record the chain committed to."))
		}
	case hasCommit && p.erasure(PayloadSource) == nil:
		s.findings = append(s.findings, finding(CodePayloadMissing, commit, "",
			"The entry commits to a source record by source_sha256, and the evidence carries neither the record nor a record of its erasure."))
	}
	if p.params != nil {
		want := ""
		if v := acs.CanonicalMember(e.Content, "request_hash"); v != nil {
			want, _ = canonicalString(v)
		}
		got, err := acs.RequestHash(p.params)
		switch {
		case err != nil:
			s.findings = append(s.findings, finding(CodePayloadMismatch, want, "", fmt.Sprintf("The request params the step carries do not canonicalize (%v), so they cannot be the params request_hash commits to.", err)))
		case want == "" || got.String() != want:
			s.findings = append(s.findings, finding(CodePayloadMismatch, want, got.String(),
				"The request params the step carries do not hash (ACS §8.1) to the entry's request_hash: they are not the params the Guardian decided on."))
		}
	}
	for _, m := range p.missing {
		if m == PayloadSource && hasCommit {
			continue // reported above, from the entry itself
		}
		if (m == PayloadParams && p.params != nil) || (m == PayloadSource && p.source != nil) {
			continue
		}
		what := "request params"
		if m == PayloadSource {
			what = "source record"
		}
		s.findings = append(s.findings, finding(CodePayloadMissing, "", "",
			fmt.Sprintf("The ledger holds no %s beside this entry, and no record of their erasure: they were deleted outside the ledger's erasure path.", what)))
	}
	for k := range p.erased {
		er := p.erased[k]
		what := "request params were"
		if er.Payload == PayloadSource {
			what = "source record was"
		}
		by := ""
		if er.ErasedBy != "" {
			by = fmt.Sprintf(" by %q", er.ErasedBy)
		}
		n := finding(CodePayloadErased, "", "", fmt.Sprintf("The %s erased at %s%s, reason: %q. The entry still commits to them by hash.",
			what, er.ErasedAt.UTC().Format(time.RFC3339Nano), by, er.Reason))
		n.Erasure = &er
		s.notices = append(s.notices, n)
	}
}

// PayloadMismatchNoCommitment is the message of a source record carried
// beside an entry that commits to none.
const PayloadMismatchNoCommitment = "The step carries a source record, but its entry has no source_sha256 to check it against."

// sourceCommitment returns an entry's top-level source_sha256, lowercase
// hex, and whether it has one.
func sourceCommitment(e *acs.Entry) (string, bool) {
	if !bytes.Contains(e.Content, []byte(`"source_sha256"`)) {
		return "", false
	}
	v := acs.CanonicalMember(e.Content, "source_sha256")
	if v == nil {
		return "", false
	}
	str, ok := canonicalString(v)
	if !ok {
		return string(v), true // not a string: no record can match it
	}
	return str, true
}

// noteInline counts entries that hold their source record inline
// ("source_record", written before sources were kept apart): they verify
// as they are, and a notice says how many there are.
func (s *bundleState) noteInline(i int, e *acs.Entry) {
	if !bytes.Contains(e.Content, []byte(`"source_record"`)) || acs.CanonicalMember(e.Content, "source_record") == nil {
		return
	}
	if s.inline == 0 {
		s.inlineFirst = i
	}
	s.inline++
}

func (s *bundleState) finishInline() {
	if s.inline == 0 {
		return
	}
	s.notices = append(s.notices, Finding{Code: CodeSourceInline, EntryIndex: s.inlineFirst, Where: "entries",
		Actual:  fmt.Sprint(s.inline),
		Message: fmt.Sprintf("%d entries, the first at index %d, hold their source record inline (ingested before source records were kept beside the entry): they verify as they are, and their source cannot be erased without breaking the chain.", s.inline, s.inlineFirst)})
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
