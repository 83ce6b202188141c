P="psql -q -X -h 127.0.0.1 -U postgres test"
# The designs compare against the schema as it was before any of them was
# built: the migrations up to 0021 (0022 built `partition_design.sql`).
BASELINE=0021
$P -c "DROP SCHEMA IF EXISTS exp CASCADE" -c "CREATE SCHEMA exp"
(echo "SET search_path=exp;"
 for f in "$(dirname "$0")"/../../../migrations/postgres/*.sql; do
   [[ "$(basename "$f")" > "${BASELINE}_~" ]] || cat "$f"
 done) | $P -v ON_ERROR_STOP=1 >/dev/null
$P -f "$(dirname "$0")"/setup_common.sql
