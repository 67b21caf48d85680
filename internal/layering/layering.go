// Package layering holds the test that keeps the tree reading in the
// direction the data flows (the README's Layout): acs (the protocol
// vocabulary) -> guardian (the writer) -> ledger (the append-only store and
// its Merkle log) -> verify (pure checks) -> web and cmd (people and
// programs). A lower layer never imports an upper one, the Merkle log and
// the offline verifier link no database driver, and OPA reaches the web
// server only through the Guardian's packages. The rules are in
// layering_test.go; they read the build graph with `go list`, non-test
// dependencies only, so a test helper may reach further than the code it
// tests.
package layering
