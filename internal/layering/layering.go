// Package layering holds the test that keeps the tree reading in the
// direction the data flows (the README's Layout): acs (the protocol
// vocabulary) -> guardian and ingest (the writers) -> ledger (the
// append-only store and its Merkle log) -> verify (pure checks) -> web and
// cmd (people and programs). A lower layer never imports an upper one;
// ingest reaches the ledger only through its contracts (package ledger and
// what it needs, no store implementation) and never the Guardian; the
// Merkle log and the offline verifier link no database driver; and OPA
// reaches the web server only through the Guardian's packages. No package
// but ledger/storeopen and cmd declares or takes an interface of more than
// twelve methods (ifacesize_test.go). The rules
// are in layering_test.go, a table keyed by directory prefix, so a package
// that splits keeps its rule and a new one is one row; a new top-level
// directory without a row fails until it has one. They read the build
// graph with `go list`, non-test dependencies only, so a test helper may
// reach further than the code it tests.
package layering
