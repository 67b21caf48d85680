// Package patroni holds the drills of docs/operations.md ("Patroni"): a
// single-node etcd and a two-node Patroni cluster of PostgreSQL 15 with
// synchronous_mode on loopback, acsledger's roles (the deploy script) and
// migrations applied through the leader, and a built `acsledger serve` on
// the multi-host URL with target_session_attrs=read-write under Guardian
// load. Patroni, not the test, elects and promotes.
//
// Each drill passes when every decision answered with a chain head is in
// the ledger on the new leader and its session's chain verifies, no ALLOW
// was answered while no server took writes, and a checkpoint of the
// Merkle log signed after the failover is consistent with one signed
// before it.
//
// The drills are tests behind the build tag drills (make drills); under
// CI=true a missing etcd, patroni or PostgreSQL fails them:
//
//	CI=true go test -tags drills -count=1 -v ./internal/drills/patroni
package patroni
