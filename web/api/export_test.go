package api

// Names of the package's internals for its external tests.
type (
	HitJSON        = hitJSON
	SessionHitJSON = sessionHitJSON
	IntegrityJSON  = integrityJSON
	StepJSON       = stepJSON
	PolicyJSON     = policyJSON
	ReverifyJSON   = reverifyJSON
)

const RetryAfterSeconds = retryAfterSeconds
