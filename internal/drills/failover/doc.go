// Package failover is the failover drill of docs/operations.md ("Failover
// on a synchronous standby"): a primary PostgreSQL and its synchronous
// standby on loopback, `acsledger serve` on a multi-host connection string
// under Guardian load, kill -9 of the primary, pg_ctl promote of the
// standby. It passes when every decision that got a signed answer is in
// the ledger on the new primary, every session's chain verifies and the
// Merkle log's new checkpoints extend the one signed before the failover.
// The export drill (TestExportCursorFailover) runs the same failover with a
// push sink to a loopback HTTP receiver: the sink goes on from the cursor
// the old primary committed, every entry of the final log arrives, and the
// receiver holds no more duplicates than the sink counts resent.
//
// The drill is a test behind the build tag drills (make drills):
//
//	CI=true go test -tags drills -count=1 -v ./internal/drills/failover
package failover
