#!/bin/bash
# Runs each design's ingest and burn-down on a fresh scratch schema, one
# after another, so their figures come from the same machine and minute.
# usage: compare.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")"
P="psql -q -X -h 127.0.0.1 -U postgres test"
run() { # name, design file (or -), ingest file, burn file (or -)
  bash reset.sh
  [ "$2" = - ] || $P -v ON_ERROR_STOP=1 -f "$2" >/dev/null
  [ "$4" = - ] || $P -v ON_ERROR_STOP=1 -f "$4" >/dev/null
  $P -c "CHECKPOINT"
  local w0 t0 t1 w1
  w0=$($P -At -c "select pg_current_wal_lsn()")
  t0=$(date +%s.%N)
  $P -v ON_ERROR_STOP=1 -f "$3" >/dev/null
  t1=$(date +%s.%N)
  w1=$($P -At -c "select pg_current_wal_lsn()")
  echo "== $1"
  echo "ingest: $(echo "$t1 - $t0" | bc) s, WAL $($P -At -c "select round(pg_wal_lsn_diff('$w1','$w0')/50000.0)") B a delivery"
  ./measure.sh 2>&1 | grep -v '^$'
}
for round in $(seq "${1:-1}"); do
  run "today (round $round)" - ingest_current.sql burn_current.sql
  run "queue table (round $round)" queue_design.sql ingest_queue.sql -
  run "history written once (round $round)" once_design.sql ingest_once.sql -
  run "partitions by state (round $round)" partition_design.sql ingest_current.sql burn_current.sql
done
