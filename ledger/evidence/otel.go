package evidence

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Telemetry of whole-ledger re-verification. Providers are the global ones
// (no-ops until the program installs real ones). The outcome label takes
// one of outcomeVerified, outcomeFindings and outcomeError, nothing else.
const instrumentationName = "github.com/acsledger/acsledger/ledger/evidence"

var (
	meter = otel.Meter(instrumentationName)

	reverifyRuns, _ = meter.Int64Counter("acsledger.reverify.runs",
		metric.WithDescription("Whole-ledger re-verification runs finished, by outcome."))
	reverifyFailed, _ = meter.Int64Gauge("acsledger.reverify.sessions_failed",
		metric.WithDescription("Sessions that did not verify in the last finished re-verification run (0 means the whole ledger verified)."))
	reverifySessions, _ = meter.Int64Gauge("acsledger.reverify.sessions",
		metric.WithDescription("Sessions checked by the last finished re-verification run."))
	reverifyDuration, _ = meter.Float64Histogram("acsledger.reverify.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of whole-ledger re-verification runs."))
)

var attrOutcome = attribute.Key("acsledger.outcome")

const (
	outcomeVerified = "verified"
	outcomeFindings = "findings"
	outcomeError    = "error"
)
