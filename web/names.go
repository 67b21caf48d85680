package web

import (
	"context"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
)

// Access control's names, under which the commands and the tests of other
// packages know them (web/access holds each).
type (
	// Role is what a credential may do.
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
	RoleAdmin   = access.RoleAdmin
	RoleWriter  = access.RoleWriter
	RoleAuditor = access.RoleAuditor
	RoleViewer  = access.RoleViewer
	RoleMetrics = access.RoleMetrics
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
