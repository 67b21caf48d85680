#!/usr/bin/env bash
# ab.sh: a same-sitting A/B of two checkouts of this repository, OLD and NEW
# (for example `git worktree add /tmp/old REV`): the acsledger binary and the
# test binaries of the store, ingest, Merkle log, replay and verify packages
# are built from each and run alternately, old then new, ROUNDS times, with
# the Guardian runs on fresh databases of one throwaway PostgreSQL (durable).
# BenchmarkSearch uses only the store's public API; when OLD lacks it, the
# NEW file is copied in. Runs as root (initdb as the postgres user).
#
#   OLD=/tmp/old NEW=. ROUNDS=2 bash internal/bench/ab.sh > ab.log
#
# Read the same-run ratios (docs/benchmarks.md): the box is shared.
set -u
: "${OLD:?set OLD to the old checkout}"; NEW=${NEW:-.}; OUT=${OUT:-/tmp/ab}; ROUNDS=${ROUNDS:-2}
OLD=$(cd "$OLD" && pwd); NEW=$(cd "$NEW" && pwd)
[ -e "$OLD/ledger/pgstore/search_bench_test.go" ] || cp "$NEW/ledger/pgstore/search_bench_test.go" "$OLD/ledger/pgstore/"
mkdir -p $OUT
for v in old new; do
  src=$OLD; [ $v = new ] && src=$NEW
  (cd $src && go build -o $OUT/acsledger-$v ./cmd/acsledger &&
   go test -c -o $OUT/pgstore-$v.test ./ledger/pgstore &&
   go test -c -o $OUT/ingest-$v.test ./ingest &&
   go test -c -o $OUT/tlog-$v.test ./ledger/tlog &&
   go test -c -o $OUT/verify-$v.test ./verify &&
   go test -c -o $OUT/replay-$v.test ./guardian/replay) || { echo "build $v failed"; exit 1; }
done
(cd $NEW && go build -o $OUT/opa github.com/open-policy-agent/opa)
# A throwaway PostgreSQL for the Guardian runs (durable: fsync and synchronous_commit on).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1); PGD=$OUT/pgdata; rm -rf $PGD; mkdir -p $PGD; chown postgres $PGD
runuser -u postgres -- $PGBIN/initdb -A trust -U postgres -D $PGD >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D $PGD -l $PGD/pg.log -w -o "-p 55432 -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
trap 'runuser -u postgres -- $PGBIN/pg_ctl -D $PGD -m immediate stop >/dev/null' EXIT
n=0
for r in $(seq $ROUNDS); do for v in old new; do
  n=$((n+1)); db=ab$n; src=$OLD; [ $v = new ] && src=$NEW
  psql -q -h 127.0.0.1 -p 55432 -U postgres -c "create database $db" >/dev/null
  echo "### round $r $v guardian"; $OUT/acsledger-$v bench guardian --peer opa-server --opa $OUT/opa --sessions 16,64 --duration 8s --db "postgres://postgres@127.0.0.1:55432/$db?sslmode=disable" 2>&1 | grep -v '^time='
  echo "### round $r $v append"; (cd $src/ledger/pgstore && CI=true $OUT/pgstore-$v.test -test.run '^$' -test.bench 'BenchmarkAppend$/(batched-vs-raw|concurrent-vs-raw)' -test.benchtime 1x 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v appendrequest"; (cd $src/ledger/pgstore && CI=true $OUT/pgstore-$v.test -test.run '^$' -test.bench 'AppendRequest/sessions=(16|64)' -test.benchtime 2000x 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v search"; (cd $src/ledger/pgstore && CI=true $OUT/pgstore-$v.test -test.run '^$' -test.bench 'BenchmarkSearch$' -test.benchtime 1s 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v ingest"; (cd $src/ingest && CI=true $OUT/ingest-$v.test -test.run '^$' -test.bench 'BulkPostgres|OPAUploads' -test.benchtime 1x 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v tlog"; (cd $src/ledger/tlog && CI=true $OUT/tlog-$v.test -test.run '^$' -test.bench 'Integration/(postgres|sqlite)' -test.benchtime 1x 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v findentry"; (cd $src/guardian/replay && CI=true $OUT/replay-$v.test -test.run '^$' -test.bench 'FindEntry' -test.benchtime 1s 2>&1 | grep -E '^Benchmark')
  echo "### round $r $v verify"; (cd $src/verify && $OUT/verify-$v.test -test.run '^$' -test.bench 'ChainReplay|BundleVerify' -test.benchtime 1s 2>&1 | grep -E '^Benchmark')
done; done
