P="psql -q -X -h 127.0.0.1 -U postgres test"
$P -c "DROP SCHEMA IF EXISTS exp CASCADE" -c "CREATE SCHEMA exp"
(echo "SET search_path=exp;"; cat "$(dirname "$0")"/../../../migrations/postgres/*.sql) | $P -v ON_ERROR_STOP=1 >/dev/null
$P -f "$(dirname "$0")"/setup_common.sql
