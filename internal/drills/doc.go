//go:build drills

// Package drills holds the fault drills: a built `acsledger serve` killed
// with SIGKILL under Guardian load and during a bulk ingest, PostgreSQL
// stopped and started under load, its connections cut mid-transaction, and
// a ledger backed up (pg_dump, pg_basebackup, the embedded store's sqlite3
// .backup) and restored to a fresh server, whose evidence acsverify then
// checks offline. Each drill checks what an operator relies on after the fault (every signed
// answer is in the ledger, chained, anchored in the Merkle log, stored
// once) and prints its counts on one summary line starting "drill ".
//
// The drills build only with the tag: `make drills` runs them
// (`go test -tags drills ./internal/drills/...`); `go test ./...` compiles
// nothing here. Everything runs on loopback with throwaway stores, and
// every load is bounded in count and time. docs/operations.md ("Drills")
// keeps the figures of a run.
//
// The exported helpers (Main, Build, Serve, Agent, Load, the ledger checks)
// are for drills in sub-packages too. Agent is internal/acsagent's signed
// ACS agent, the one the benchmarks and the demo use, with every answer's
// signature checked.
package drills
