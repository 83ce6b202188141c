#!/usr/bin/env bash
# A scratch database with the real Postgres migrations up to 0035 (the
# constraints `checks.sh` compares are 0022's, which 0036 replaced), ten
# endpoints and 200 000 pending deliveries of 20 000 events (1 KB payloads).
set -euo pipefail
DB="${SCRATCH_DB:-dakghar_scratch}"
PSQL="psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres"
here="$(cd "$(dirname "$0")" && pwd)"
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
for f in "$here"/../../../migrations/postgres/00{0,1,2}*.sql "$here"/../../../migrations/postgres/003[0-5]*.sql; do
    $PSQL -d "$DB" -f "$f" >/dev/null
done
$PSQL -d "$DB" -f "$here/data.sql" -f "$here/functions.sql" -f "$here/claim_ids.sql" -f "$here/claim_columns.sql"
