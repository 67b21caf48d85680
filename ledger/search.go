package ledger

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The compliance search (docs/ui.md, "Search") reads a projection of the
// entries, search_entries (migration 0010), that triggers fill in the
// appending transaction: the decision's disposition, reason codes, policy
// references and reasoning, the tool name from the request's params, and
// for records ingested from elsewhere their source and flags. The
// projection is derived and commits to nothing; each hit names the entry
// whose bundle proves it.

// SearchFilter selects entries. Zero fields do not filter; set fields all
// have to match.
type SearchFilter struct {
	AgentID string
	// AgentPrefix keeps agents whose id starts with it: a scoped
	// credential's scope.
	AgentPrefix string
	// ExcludeAgent leaves one agent's entries out (the access log's).
	ExcludeAgent string
	// Since and Until keep entries recorded in [Since, Until).
	Since, Until time.Time
	// Disposition is the decision: allow, deny, modify, ask or defer, as
	// the entry records it.
	Disposition string
	ReasonCode  string
	// PolicyID keeps entries whose decision cites the policy; with
	// PolicyVersion, that version of it.
	PolicyID, PolicyVersion string
	ToolName                string
	// Source is where the record came from: "guardian" for this ledger's
	// Guardian and entries without a source member, else the entry's own
	// source member (ingest: "opa", "bash-guard", "a2h", ...).
	Source string
	// Flag keeps entries whose flags hold it (fail_open, unlock_bypass).
	Flag string
	// Text keeps entries whose reasoning holds it, ignoring case.
	Text string
	// Limit is the page size: 0 means DefaultPageSize, at most
	// MaxPageSize.
	Limit int
	// Cursor is the Next of the previous page, "" for the first.
	Cursor string
}

// Check refuses a filter no store should run: invalid UTF-8 or an
// oversized value, and an inverted time range.
func (f SearchFilter) Check() error {
	for name, v := range map[string]string{
		"agent_id": f.AgentID, "disposition": f.Disposition, "reason_code": f.ReasonCode,
		"policy_id": f.PolicyID, "policy_version": f.PolicyVersion, "tool": f.ToolName,
		"source": f.Source, "flag": f.Flag, "text": f.Text,
	} {
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: search %s is not valid UTF-8", ErrInvalidSearch, name)
		}
		if len(v) > MaxAgentIDBytes {
			return fmt.Errorf("%w: search %s is longer than %d bytes", ErrInvalidSearch, name, MaxAgentIDBytes)
		}
	}
	if f.PolicyVersion != "" && f.PolicyID == "" {
		return fmt.Errorf("%w: policy_version needs policy_id", ErrInvalidSearch)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("%w: since must be before until", ErrInvalidSearch)
	}
	return nil
}

// PolicyRef is the value search_entries.policy_refs holds for a policy
// reference: the id alone matches every version, "id@version" one.
func (f SearchFilter) PolicyRef() string {
	if f.PolicyVersion != "" {
		return f.PolicyID + "@" + f.PolicyVersion
	}
	return f.PolicyID
}

// ErrInvalidSearch marks a search filter or cursor a store refuses.
var ErrInvalidSearch = errors.New("invalid search")

// SearchHit is one matching entry, newest first.
type SearchHit struct {
	SessionID   string
	Position    int64
	AgentID     string
	RecordedAt  time.Time
	StepID      string
	StepType    string
	Disposition string
	ReasonCodes []string
	// PolicyRefs are "policy_id@policy_version" of each reference.
	PolicyRefs []string
	ToolName   string
	Source     string
	Flags      []string
	Reasoning  string

	seq int64
}

// SearchPage is one page of entry hits.
type SearchPage struct {
	Hits []SearchHit
	// Next continues after the last hit; "" on the last page.
	Next string
}

// SessionHit is one session holding matching entries.
type SessionHit struct {
	SessionID string
	AgentID   string
	// Matches counts its matching entries; First and Last are when the
	// first and last of them were recorded.
	Matches     int64
	First, Last time.Time
}

// SessionSearchPage is one page of session hits, in session id order.
type SessionSearchPage struct {
	Sessions []SessionHit
	Next     string
}

// NewSearchHit returns h with the projection row's sequence number, which
// the page's cursor continues after. It is for Store implementations.
func NewSearchHit(h SearchHit, seq int64) SearchHit {
	h.seq = seq
	return h
}

// EntryCursor returns the cursor continuing after h. It is for Store
// implementations.
func EntryCursor(h SearchHit) string { return "e" + strconv.FormatInt(h.seq, 10) }

// ParseEntryCursor decodes an EntryCursor; "" is the start, reported as
// 0 with ok false.
func ParseEntryCursor(c string) (seq int64, ok bool, err error) {
	if c == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(c[1:], 10, 64)
	if c[0] != 'e' || err != nil || n <= 0 || "e"+strconv.FormatInt(n, 10) != c {
		return 0, false, fmt.Errorf("%w: cursor %q is not an entry search cursor this ledger made", ErrInvalidSearch, c)
	}
	return n, true, nil
}

// SessionCursor returns the cursor continuing after session id. It is for
// Store implementations.
func SessionCursor(id string) string { return "s" + base64.RawURLEncoding.EncodeToString([]byte(id)) }

// ParseSessionCursor decodes a SessionCursor; "" is the start.
func ParseSessionCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c[1:])
	if c[0] != 's' || err != nil || len(b) == 0 || !utf8.Valid(b) {
		return "", fmt.Errorf("%w: cursor %q is not a session search cursor this ledger made", ErrInvalidSearch, c)
	}
	return string(b), nil
}

// VersionedRefs keeps the "id@version" elements of a projection's
// policy_refs, which also lists each id alone for matching. It is for
// Store implementations.
func VersionedRefs(refs []string) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if strings.Contains(r, "@") {
			out = append(out, r)
		}
	}
	return out
}

// DayStats is one UTC day of the ledger, for the dashboard's charts.
type DayStats struct {
	Day time.Time
	// Entries appended that day, by disposition ("" for entries without
	// a decision); Sessions created that day.
	Decisions map[string]int64
	Entries   int64
	Sessions  int64
}

// TreeSize is the Merkle log's size at one signed checkpoint.
type TreeSize struct {
	Size uint64
	At   time.Time
}

// SortedDays returns days in day order. It is for Store implementations.
func SortedDays(days map[time.Time]*DayStats) []DayStats {
	out := make([]DayStats, 0, len(days))
	for _, d := range days {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b DayStats) int { return a.Day.Compare(b.Day) })
	return out
}

// ToolName is the tool a request's params name (payload.tool.name), or ""
// when they name none. The store keeps it in clear beside the sealed
// params (request_params.tool_name, migration 0010) so that the compliance
// search can find a tool's calls without reading params: the name is what
// a search asks for, the arguments are what sealing and erasure protect.
func ToolName(params []byte) string {
	var p struct {
		Payload struct {
			Tool struct {
				Name string `json:"name"`
			} `json:"tool"`
		} `json:"payload"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.Payload.Tool.Name
}
