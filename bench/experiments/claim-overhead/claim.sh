#!/usr/bin/env bash
# One claim of one delivery over ten endpoints with due work, one
# connection, prepared, each in a transaction rolled back (so every call
# sees the same queue): migration 0033's function under the engine's
# query (its composites expanded), the same answering columns, and
# answering only ids; `empty` is BEGIN; SELECT 1; ROLLBACK, the round
# trips every variant pays. `$1` rounds of 8 s each (default 4).
set -euo pipefail
DB="${SCRATCH_DB:-dakghar_scratch}"
ROUNDS="${1:-4}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
ARGS="(1000000000000, 1000000060000, 1, 't', 0, 0)"
OUTER="SELECT c.held_back, (c.claimed).*, (c.event).id IS NOT NULL AS has_event, \
(c.event).event_type AS event_type, (c.event).payload AS event_payload, \
(c.event).created_at AS event_created_at, (c.event).traceparent AS event_traceparent, \
c.endpoint AS endpoint_json FROM dakghar_claim_with_inputs$ARGS c"
printf 'BEGIN;\n%s;\nROLLBACK;\n' "$OUTER" > "$dir/composites.sql"
printf 'BEGIN;\nSELECT * FROM claim_columns%s;\nROLLBACK;\n' "$ARGS" > "$dir/columns.sql"
printf 'BEGIN;\nSELECT * FROM claim_ids%s;\nROLLBACK;\n' "$ARGS" > "$dir/ids.sql"
printf 'BEGIN;\nSELECT 1;\nROLLBACK;\n' > "$dir/empty.sql"
for round in $(seq "$ROUNDS"); do
    for v in composites columns ids empty; do
        ms=$(pgbench -n -M prepared -h 127.0.0.1 -U postgres -c1 -T8 -f "$dir/$v.sql" "$DB" 2>&1 \
             | awk '/latency average/ {print $4}')
        echo "$v $ms"
    done
done | awk '{a[$1] = a[$1] " " $2} END {for (k in a) print k ":" a[k] " ms a transaction"}' | sort
