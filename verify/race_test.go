//go:build race

package verify

// raceEnabled makes the slowest exhaustive tests sample under the race
// detector, which runs them about ten times slower.
const raceEnabled = true
