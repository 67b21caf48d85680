package web

import (
	"github.com/acsledger/acsledger/guardian/whatif"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/retentionapi"
)

// The roles of the access table's rows.
var (
	readers    = []Role{RoleAdmin, RoleAuditor, RoleViewer}
	auditors   = []Role{RoleAdmin, RoleAuditor}
	writers    = []Role{RoleAdmin, RoleWriter}
	adminsOnly = []Role{RoleAdmin}
	everyone   = []Role{RoleAdmin, RoleWriter, RoleAuditor, RoleViewer, RoleMetrics}
)

// maxGuardianBody is the cap on /acs bodies; the Guardian applies its own
// (1 MiB by default) below it.
const maxGuardianBody = 4 << 20

// maxIngestBody caps one OPA decision-log upload (gzip or plain). OPA's
// plugin uploads a few MiB at most; ingest reads it in bounded batches.
const maxIngestBody = 256 << 20

// maxOTLPBody caps one OTLP request as sent (gzip or not); the route caps
// it again after decompression (ingestapi.DefaultMaxOTLPBodyBytes).
const maxOTLPBody = 16 << 20

// AccessTable is every route the server answers and who may use it: the
// router's guard enforces it (web/access) and docs/security.md shows it; a
// test holds both to it and fails on a registered route missing from it.
// Routes mounted by other packages (web/tlogserve, web/ui, the Guardian,
// /metrics) are listed here too, so that one table says who may reach
// what.
var AccessTable = []Route{
	{Method: "GET", Pattern: "/healthz", Public: true},
	{Method: "GET", Pattern: "/readyz", Public: true},
	{Method: "GET", Pattern: "/checkpoint", Public: true},
	{Method: "GET", Pattern: "/tile/*", Public: true},
	{Method: "GET", Pattern: "/api/v1/proofs/inclusion", Public: true},
	{Method: "GET", Pattern: "/api/v1/proofs/consistency", Public: true},
	{Method: "GET", Pattern: "/api/v1/checkpoints/{size}", Public: true},
	{Method: "GET", Pattern: "/api/v1/checkpoints/{size}/timestamp", Public: true},
	{Method: "POST", Pattern: "/acs", Public: true, MaxBody: maxGuardianBody},
	{Method: "POST", Pattern: "/acs/approvals", Public: true},
	{Method: "GET", Pattern: "/metrics", Roles: []Role{RoleAdmin, RoleMetrics}},

	{Method: "GET", Pattern: "/api/v1/whoami", Roles: everyone},
	{Method: "GET", Pattern: "/api/v1/sessions", Roles: readers, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}", Roles: readers, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}/entries", Roles: readers, Recorded: true},
	{Method: "POST", Pattern: "/api/v1/sessions/{session_id}/entries", Roles: writers},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}/steps", Roles: readers, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}/bundle", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}/entries/{position}/receipt", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/sessions/{session_id}/verify", Roles: readers, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/proofs/entry/{session_id}/{position}", Roles: auditors, Recorded: true},
	{Method: "POST", Pattern: "/api/v1/verify/bundle", Roles: auditors, MaxBody: api.DefaultMaxBundleBytes},
	{Method: "GET", Pattern: "/api/v1/policies", Roles: readers},
	{Method: "GET", Pattern: "/api/v1/decisions/{request_id}", Roles: readers, Recorded: true},
	{Method: "POST", Pattern: "/api/v1/decisions/{request_id}/replay", Roles: auditors, Recorded: true},
	{Method: "POST", Pattern: "/api/v1/whatif", Roles: auditors, Recorded: true, MaxBody: whatif.DefaultMaxBundleBytes},
	{Method: "GET", Pattern: "/api/v1/whatif/{run_id}", Roles: auditors, Recorded: true},
	{Method: "POST", Pattern: "/api/v1/whatif/{run_id}/cancel", Roles: auditors},
	{Method: "POST", Pattern: "/api/v1/ingest/opa/logs", Roles: writers, MaxBody: maxIngestBody},
	{Method: "POST", Pattern: "/api/v1/ingest/a2h", Roles: writers},
	// OTLP/HTTP's own paths, outside /api/v1: an exporter appends them to
	// the endpoint it is given (docs/ingest.md).
	{Method: "POST", Pattern: "/v1/traces", Roles: writers, MaxBody: maxOTLPBody},
	{Method: "POST", Pattern: "/v1/logs", Roles: writers, MaxBody: maxOTLPBody},
	{Method: "GET", Pattern: "/api/v1/ingest/quarantine", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/ingest/flagged", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/search", Roles: readers, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/search/export", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/events", Roles: auditors, Recorded: true},
	{Method: "GET", Pattern: "/api/v1/exports", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/integrity", Roles: readers},
	{Method: "GET", Pattern: "/api/v1/log", Roles: readers},
	{Method: "GET", Pattern: "/api/v1/stats", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/reverify", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/admin/reverify", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/admin/tokens", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/tokens", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/tokens/{name}/revoke", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/admin/retention", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/admin/retention/rules", Roles: adminsOnly},
	{Method: "PUT", Pattern: "/api/v1/admin/retention/rules/{name}", Roles: adminsOnly, MaxBody: retentionapi.MaxBody},
	{Method: "DELETE", Pattern: "/api/v1/admin/retention/rules/{name}", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/retention/sweep", Roles: adminsOnly},
	{Method: "GET", Pattern: "/api/v1/admin/holds", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/holds", Roles: adminsOnly, MaxBody: retentionapi.MaxBody},
	{Method: "POST", Pattern: "/api/v1/admin/holds/{case}/release", Roles: adminsOnly},
	{Method: "POST", Pattern: "/api/v1/admin/erasures", Roles: adminsOnly},

	{Method: "GET", Pattern: "/ui", Public: true},
	{Method: "GET", Pattern: "/ui/login", Public: true},
	{Method: "POST", Pattern: "/ui/login", Public: true},
	{Method: "POST", Pattern: "/ui/logout", Roles: everyone},
	{Method: "GET", Pattern: "/ui/static/*", Public: true},
	{Method: "GET", Pattern: "/ui/", Roles: readers},
	{Method: "GET", Pattern: "/ui/sessions/{session_id}", Roles: readers},
	{Method: "GET", Pattern: "/ui/decisions/{request_id}", Roles: readers},
	{Method: "GET", Pattern: "/ui/dashboard", Roles: adminsOnly},
	{Method: "GET", Pattern: "/ui/search", Roles: readers},
	{Method: "GET", Pattern: "/ui/whatif", Roles: auditors},
	{Method: "GET", Pattern: "/ui/log", Roles: readers},
	{Method: "GET", Pattern: "/ui/holds", Roles: adminsOnly},
}
