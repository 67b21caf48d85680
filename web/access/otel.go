package access

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Telemetry of access control. Providers are the global ones (no-ops
// until the program installs real ones). The reason label takes an
// authFailure's reason ("missing", "malformed", "unknown", "expired",
// "revoked", "wrong_role", "csrf", "wrong_token") or "rate_limited",
// nothing else; the outcome label "recorded" or "error".
//
// The instrumentation scope keeps the name of the package access control
// was part of, web, so that dashboards and alerts that select on it keep
// working.
const instrumentationName = "github.com/acsledger/acsledger/web"

var (
	meter = otel.Meter(instrumentationName)

	authRefusals, _ = meter.Int64Counter("acsledger.auth.refusals",
		metric.WithDescription("Requests refused by access control, by reason: a rise in unknown or malformed is someone guessing tokens."))
	accessRecords, _ = meter.Int64Counter("acsledger.access_log.records",
		metric.WithDescription("Evidence reads written to the access log, by outcome; an error refuses the read."))
)

var (
	attrReason  = attribute.Key("acsledger.reason")
	attrOutcome = attribute.Key("acsledger.outcome")
)

const reasonRateLimited = "rate_limited"
