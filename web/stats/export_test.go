package stats

// Names of the package's internals for its external tests.
type (
	LogJSON   = logJSON
	StatsJSON = statsJSON
)
