package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/ledger"
)

// The access log records every read of evidence made with a credential:
// who (the token's name and role), what (the route, the path, the session
// and request id), when and from where. It is an ordinary chain of
// ContextEntries in the ledger, one session per UTC day, so it is
// append-only, hash-chained and anchored in the Merkle log like the
// evidence it describes, and its bundles verify with acsverify.

// AccessAgentID is the agent id of the access log's sessions. Only admins
// and auditors see them; no one can append to them through the API.
const AccessAgentID = "acsledger-access"

// AccessStepType is the step_type of an access log entry. It answers no
// ACS request, so no signed response publishes its head.
const AccessStepType = "acsledger/access"

// AccessSessionID is the access log's session for the day of t (UTC).
func AccessSessionID(t time.Time) string {
	return AccessAgentID + "-" + t.UTC().Format(time.DateOnly)
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

// uuid4 is a random RFC 9562 version 4 UUID.
func uuid4() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// recordAccess appends the access log entry of one request. The query
// string is left out: it is not evidence of what was read, and a client
// that put a secret there by mistake should not see it kept forever.
func (s *Server) recordAccess(ctx context.Context, p *Principal, r *http.Request, pattern, sessionID, requestID string) error {
	now := s.auth.opts.Now().UTC()
	if requestID != "" && sessionID == "" {
		sessionID = r.URL.Query().Get("session_id")
	}
	id := uuid4()
	b, err := json.Marshal(accessEntry{
		EntryID: id, StepID: id, StepType: AccessStepType, Timestamp: now.Format("2006-01-02T15:04:05.000Z"),
		Access: accessRecord{
			Who: p.Name, Role: p.Role, Route: r.Method + " " + pattern, Path: r.URL.EscapedPath(),
			SessionID: sessionID, RequestID: requestID, From: remoteHost(r),
		},
	})
	if err != nil {
		return fmt.Errorf("couldn't encode the access record: %w", err)
	}
	// A client hanging up does not cut the record short.
	if _, err := s.store.Append(context.WithoutCancel(ctx), ledger.Record{SessionID: AccessSessionID(now), AgentID: AccessAgentID, Entry: b}); err != nil {
		accessRecords.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("error")))
		return fmt.Errorf("couldn't append to the access log: %w", err)
	}
	accessRecords.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("recorded")))
	return nil
}
