package verify

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/acsledger/acsledger/acs"
)

// MaxLineBytes bounds one line of chain input, so that a file without line
// breaks cannot make the verifier hold all of it. A ContextEntry is a few
// KiB at most.
const MaxLineBytes = 16 << 20

// An InputError says that chain input could not be read or parsed. It is not
// a Finding: nothing was verified past Line.
type InputError struct {
	File string // which input, when there are several; "" for one
	Line int    // 1-based, for line-oriented input; 0 otherwise
	// For a bundle: the member being read ("entries") and the byte offset
	// reached in the input when the problem was found.
	Member string
	Offset int64
	Err    error
}

func (e *InputError) Error() string {
	if e.Line == 0 {
		where := fmt.Sprintf("byte %d", e.Offset)
		if e.Member != "" {
			where = fmt.Sprintf("%s (near byte %d)", e.Member, e.Offset)
		}
		if e.File != "" {
			return fmt.Sprintf("%s: %s: %v", e.File, where, e.Err)
		}
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	if e.File != "" {
		return fmt.Sprintf("%s: line %d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// A Report is the outcome of replaying a whole chain.
type Report struct {
	Entries int
	// Head is the recomputed entry_hash of the last entry: the chain_hash
	// that published heads are compared against.
	Head     acs.Hash
	Findings []Finding
	// Notices are things worth knowing that are not failures, such as a
	// signature that could not be checked without a secret
	// (unverifiable_hmac). They do not affect Verified.
	Notices []Finding
	// SessionID is a bundle's session_id, and Checkpoint its checkpoint
	// of the largest tree (nil when it has none): what a later bundle of
	// the session must extend (VerifyBundleSince). Empty for a chain.
	SessionID  string
	Checkpoint *Checkpoint
	// Timestamps are the bundle's checkpoints whose RFC 3161 time-stamp
	// verified, with the time each vouches for.
	Timestamps []StampedCheckpoint
	// FindingsDropped and NoticesDropped count what VerifyBundleLimited
	// did not keep beyond Limits.MaxFindings.
	FindingsDropped, NoticesDropped int
}

// Verified reports whether the chain replayed without findings.
func (r *Report) Verified() bool { return len(r.Findings) == 0 }

// ReportJSON is the JSON form of a Report, the shape `acsverify --json`
// prints (docs/acsverify.md): verified, entries, head, findings (never
// null) and notices. Its shape is a contract.
type ReportJSON struct {
	Verified bool      `json:"verified"`
	Entries  int       `json:"entries"`
	Head     string    `json:"head"`
	Findings []Finding `json:"findings"`
	Notices  []Finding `json:"notices,omitempty"`
	// Timestamps: the checkpoints whose RFC 3161 time-stamp verified.
	Timestamps []StampedCheckpoint `json:"timestamps,omitempty"`
}

// JSON converts r to its JSON shape.
func (r *Report) JSON() ReportJSON {
	out := ReportJSON{Verified: r.Verified(), Entries: r.Entries, Head: r.Head.String(), Findings: r.Findings, Notices: r.Notices, Timestamps: r.Timestamps}
	if out.Findings == nil {
		out.Findings = []Finding{}
	}
	return out
}

// VerifyChain replays a session's chain from JSON Lines: one ContextEntry
// object per line, in chain order, lines ending in "\n". Blank lines (empty
// or JSON whitespace only) may follow the last entry, nowhere else; a chain
// of no entries is an input error, so that an empty file never verifies.
//
// Findings are returned in the Report. Input that cannot be read or parsed
// returns an *InputError naming the 1-based line, and no Report.
func VerifyChain(r io.Reader) (*Report, error) {
	return replay(r, nil)
}

// replay is VerifyChain with a hook that sees each entry after the chain
// check and may add findings to the ones it returned.
func replay(r io.Reader, hook func(i int, e *acs.Entry, v *ChainVerifier, fs []Finding) []Finding) (*Report, error) {
	lr := newLineReader(r)
	var v ChainVerifier
	var findings []Finding
	blank := 0 // first blank line seen, if any
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &InputError{Line: lr.n, Err: err}
		}
		if isBlank(line) {
			if blank == 0 {
				blank = lr.n
			}
			continue
		}
		if blank != 0 {
			return nil, &InputError{Line: blank, Err: errors.New("blank line between entries (blank lines may only follow the last entry)")}
		}
		e, err := parseLine(line, lr.n)
		if err != nil {
			return nil, err
		}
		fs := v.Add(e)
		if hook != nil {
			fs = hook(v.Entries()-1, e, &v, fs)
		}
		findings = append(findings, fs...)
	}
	if v.Entries() == 0 {
		return nil, &InputError{Line: 1, Err: errors.New("no context entries")}
	}
	return &Report{Entries: v.Entries(), Head: v.Head(), Findings: findings}, nil
}

// parseLine parses one line of chain input into an entry.
func parseLine(line []byte, n int) (*acs.Entry, error) {
	e, err := acs.ParseEntry(line)
	if err != nil {
		return nil, &InputError{Line: n, Err: err}
	}
	return e, nil
}

// isBlank reports whether line holds only JSON whitespace (RFC 8259 §2).
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// lineReader splits input into lines without allocating per line: a line
// is returned from the bufio buffer when it fits, and otherwise assembled in
// one buffer reused for every long line.
type lineReader struct {
	r    *bufio.Reader
	long []byte
	n    int // 1-based number of the line last returned
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 256<<10)}
}

// next returns the next line without its "\n", valid until the next call,
// or io.EOF when the input is used up. A final line without "\n" counts.
func (lr *lineReader) next() ([]byte, error) {
	lr.n++
	line, err := lr.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	lr.long = lr.long[:0]
	for err == bufio.ErrBufferFull {
		lr.long = append(lr.long, line...)
		if len(lr.long) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		line, err = lr.r.ReadSlice('\n')
	}
	switch {
	case err == nil:
		lr.long = append(lr.long, line[:len(line)-1]...)
	case err == io.EOF:
		lr.long = append(lr.long, line...)
		if len(lr.long) == 0 {
			return nil, io.EOF
		}
	default:
		return nil, fmt.Errorf("couldn't read: %w", err)
	}
	if len(lr.long) > MaxLineBytes {
		return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
	}
	return lr.long, nil
}
