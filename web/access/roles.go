package access

import "slices"

// Role is what a credential may do (docs/security.md).
type Role string

// The roles. A token has exactly one.
const (
	// RoleAdmin may use every route: tokens, re-verification, and all
	// that the other roles may.
	RoleAdmin Role = "admin"
	// RoleWriter appends entries; it reads nothing beyond its own write
	// results.
	RoleWriter Role = "writer"
	// RoleAuditor reads all evidence: sessions, entries, bundles, proofs,
	// verification, decisions and replay, and the access log.
	RoleAuditor Role = "auditor"
	// RoleViewer reads what the UI's views of sessions and decisions show:
	// no exports, no replay, no request params, no access log.
	RoleViewer Role = "viewer"
	// RoleMetrics reads /metrics only, for a Prometheus scraper.
	RoleMetrics Role = "metrics"
)

// Roles lists every role, in the order docs/security.md names them.
var Roles = []Role{RoleAdmin, RoleWriter, RoleAuditor, RoleViewer, RoleMetrics}

// ValidRole reports whether r names a role.
func ValidRole(r string) bool { return slices.Contains(Roles, Role(r)) }

// Route is one row of an access table: a method and chi pattern and who
// may use it.
type Route struct {
	Method, Pattern string
	// Public routes need no credential: the Merkle log's C2SP endpoints
	// (auditors and witnesses read them without an account), the health
	// check, the UI's login page and static files, and the Guardian's
	// endpoints, which ACS request and approval signatures authenticate.
	Public bool
	// Roles may use the route when it is not public.
	Roles []Role
	// Recorded routes read evidence: every use is appended to the access
	// log before it is served.
	Recorded bool
	// MaxBody caps the request body; 0 means the server's entry cap.
	MaxBody int64
}

// Allows reports whether role may use the route.
func (rt Route) Allows(role Role) bool { return slices.Contains(rt.Roles, role) }
