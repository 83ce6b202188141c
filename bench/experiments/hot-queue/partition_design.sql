SET search_path=exp;
-- Design C, as built: `deliveries` stays one table to every query but is
-- stored as three partitions by state, with no foreign keys; a claim or a
-- result moves the row. The migrations themselves, on the baseline schema
-- (`reset.sh`).
\ir ../../../migrations/postgres/0022_deliveries_by_state.sql
\ir ../../../migrations/postgres/0023_answer_indexes_of_live_partitions.sql
