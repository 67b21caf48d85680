package access

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
)

// The access log records every read of evidence made with a credential:
// who (the token's name and role), what (the route, the path, the session
// and request id), when and from where. It is an ordinary chain of
// ContextEntries in the ledger, one session per UTC day, so it is
// append-only, hash-chained and anchored in the Merkle log like the
// evidence it describes, and its bundles verify with acsverify.

// LogAgentID is the agent id of the access log's sessions. Only admins
// and auditors see them; no one can append to them through the API.
const LogAgentID = "acsledger-access"

// LogStepType is the step_type of an access log entry. It answers no ACS
// request, so no signed response publishes its head.
const LogStepType = "acsledger/access"

// Reserved reports the agent ids only the server writes: the access log's
// and the admin sessions of retention, holds and erasure requests
// (ledger/retention). Only unscoped admins and auditors see them.
func Reserved(agentID string) bool { return agentID == LogAgentID || agentID == retention.AgentID }

// ReservedSession reports a session id only the server may create.
func ReservedSession(id string) bool {
	return strings.HasPrefix(id, LogAgentID+"-") || strings.HasPrefix(id, retention.AgentID+"-")
}

// adminAgentID is the admin sessions' agent (ledger/retention).
const adminAgentID = retention.AgentID

// LogSessionID is the access log's session for the day of t (UTC).
func LogSessionID(t time.Time) string {
	return LogAgentID + "-" + t.UTC().Format(time.DateOnly)
}

// accessEntry is one access log entry (docs/security.md).
type accessEntry struct {
	EntryID   string       `json:"entry_id"`
	StepID    string       `json:"step_id"`
	StepType  string       `json:"step_type"`
	Timestamp string       `json:"timestamp"`
	Access    accessRecord `json:"access"`
}

type accessRecord struct {
	Who       string `json:"who"`
	Role      Role   `json:"role"`
	Route     string `json:"route"`
	Path      string `json:"path"`
	SessionID string `json:"session_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	From      string `json:"from"`
}

// recordAccess appends the access log entry of one request. The query
// string is left out: it is not evidence of what was read, and a client
// that put a secret there by mistake should not see it kept forever.
func (c *Control) recordAccess(ctx context.Context, p *Principal, r *http.Request, pattern, sessionID, requestID string) error {
	now := c.opts.Now().UTC()
	if requestID != "" && sessionID == "" {
		sessionID = r.URL.Query().Get("session_id")
	}
	id := acs.NewUUID()
	b, err := json.Marshal(accessEntry{
		EntryID: id, StepID: id, StepType: LogStepType, Timestamp: now.Format("2006-01-02T15:04:05.000Z"),
		Access: accessRecord{
			Who: p.Name, Role: p.Role, Route: r.Method + " " + pattern, Path: r.URL.EscapedPath(),
			SessionID: sessionID, RequestID: requestID, From: remoteHost(r),
		},
	})
	if err != nil {
		return fmt.Errorf("couldn't encode the access record: %w", err)
	}
	// A client hanging up does not cut the record short.
	if _, err := c.store.Append(context.WithoutCancel(ctx), ledger.Record{SessionID: LogSessionID(now), AgentID: LogAgentID, Entry: b}); err != nil {
		accessRecords.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("error")))
		return fmt.Errorf("couldn't append to the access log: %w", err)
	}
	accessRecords.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("recorded")))
	return nil
}
