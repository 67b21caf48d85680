package web

import (
	"context"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/ingestapi"
	"github.com/acsledger/acsledger/web/stats"
)

// The names under which the commands and the tests of other packages know
// the types of the packages the server composes.
type (
	// AuthOptions configure access control (web/access).
	AuthOptions = access.Options
	// EvidenceOptions configure the evidence routes (web/api).
	EvidenceOptions = api.Options
	// IngestOptions configure the ingest routes (web/ingestapi).
	IngestOptions = ingestapi.Options
	// Searcher is the compliance search (web/api).
	Searcher = api.Searcher
	// Charts feeds the log page's and the dashboard's charts (web/stats).
	Charts = stats.Charts
	// ReplicaLag is the read replica's measured lag (web/stats).
	ReplicaLag = stats.ReplicaLag
	// Role is what a credential may do (web/access).
	Role = access.Role
	// Route is one row of AccessTable.
	Route = access.Route
	// Tokens is the token storage access control needs.
	Tokens = access.Tokens
	// RateLimits bound requests per address and per credential.
	RateLimits = access.RateLimits
	// TokenRequest describes a token to create.
	TokenRequest = access.TokenRequest
)

// The roles (access.Roles).
const (
	RoleAdmin, RoleWriter, RoleAuditor = access.RoleAdmin, access.RoleWriter, access.RoleAuditor
	RoleViewer, RoleMetrics            = access.RoleViewer, access.RoleMetrics
)

// Roles lists every role, in the order docs/security.md names them.
var Roles = access.Roles

const (
	// DefaultSessionTTL is how long a UI login lasts by default.
	DefaultSessionTTL = access.DefaultSessionTTL
	// DefaultRatePerSecond is the default sustained request rate per
	// address and per credential.
	DefaultRatePerSecond = access.DefaultRatePerSecond
	// AccessAgentID is the agent id of the access log's sessions.
	AccessAgentID = access.LogAgentID
	// AccessStepType is the step_type of an access log entry.
	AccessStepType = access.LogStepType
)

// ValidRole reports whether r names a role.
func ValidRole(r string) bool { return access.ValidRole(r) }

// AccessSessionID is the access log's session for the day of t (UTC).
func AccessSessionID(t time.Time) string { return access.LogSessionID(t) }

// CreateToken makes a token as req says and stores its hash in ts
// (access.CreateToken).
func CreateToken(ctx context.Context, ts Tokens, req TokenRequest, now time.Time) (string, ledger.Token, error) {
	return access.CreateToken(ctx, ts, req, now)
}
