package main

import "runtime/debug"

// defaultGCPercent is the garbage collector's target unless the operator
// sets GOGC or GOMEMLIMIT. A decision allocates a few hundred short-lived
// objects (the policy engine most of them) over a live heap of a few tens
// of megabytes, so at Go's default of 100 the collector runs often and took
// about 8% of the service's CPU under load; at 400 it runs a quarter as
// often, for a heap that peaks at five times the live one instead of two
// (docs/operations.md, docs/benchmarks.md).
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless the environment already tunes the
// collector: an operator's GOGC or GOMEMLIMIT always wins.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(defaultGCPercent)
}
