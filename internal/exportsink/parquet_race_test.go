//go:build race

package exportsink_test

// raceDetector: the race detector makes the embedded store that the
// Parquet tests fill about ten times slower, so under it they deliver
// 2,000 entries; .ci/run also runs them without it, at 20,000.
const raceDetector = true
