#!/usr/bin/env bash
# What the CHECK constraints of `deliveries` cost a move between
# partitions: 20 000 moves, `$1` rows a statement (default 1), with
# migration 0022's three CHECKs on the parent (variant 3), without them (0), with
# only NOT NULL on the partitions that need a column (1), and with one
# CHECK per partition besides (2, migration 0036's), and with one CHECK
# per partition saying it all (4). Each variant runs in a transaction
# that is rolled back; six rounds, the order rotated, a VACUUM before each.
set -euo pipefail
DB="${SCRATCH_DB:-dakghar_scratch}"
PER="${1:-1}"
P="psql -q -h 127.0.0.1 -U postgres -d $DB"
DROP="ALTER TABLE deliveries DROP CONSTRAINT deliveries_check2, DROP CONSTRAINT deliveries_check3, DROP CONSTRAINT deliveries_state_check1;"
V[0]="$DROP"
V[1]="$DROP ALTER TABLE in_flight_deliveries ALTER COLUMN lease_until SET NOT NULL; ALTER TABLE finished_deliveries ALTER COLUMN finished_at SET NOT NULL;"
V[2]="${V[1]} ALTER TABLE in_flight_deliveries ADD CHECK (finished_at IS NULL); ALTER TABLE finished_deliveries ADD CHECK (lease_until IS NULL); ALTER TABLE pending_deliveries ADD CHECK (lease_until IS NULL AND finished_at IS NULL);"
V[3]="SELECT 1;"
V[4]="$DROP ALTER TABLE pending_deliveries ADD CHECK (lease_until IS NULL AND finished_at IS NULL); ALTER TABLE in_flight_deliveries ADD CHECK (lease_until IS NOT NULL AND finished_at IS NULL); ALTER TABLE finished_deliveries ADD CHECK (finished_at IS NOT NULL AND lease_until IS NULL);"
for round in 1 2 3 4 5 6; do
    for j in 0 1 2 3 4; do
        v=$(( (j + round) % 5 ))
        $P -c "VACUUM deliveries"
        ms=$( { echo '\timing on'; echo "BEGIN; ${V[$v]}"; echo '\o /dev/null'
                echo "SELECT bench_moves(10000, $PER);"; echo 'ROLLBACK;'; } \
              | $P 2>&1 | grep -E '^Time: [0-9]{3,}' | awk '{print $2}')
        echo "$v $ms"
    done
done | sort -k1,1n -k2,2n | awk '{a[$1] = a[$1] " " $2} END {for (k in a) print "variant " k ":" a[k] " ms"}' | sort
