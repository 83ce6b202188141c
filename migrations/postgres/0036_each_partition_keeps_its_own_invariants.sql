-- What a delivery's state says of its lease and finish time, kept by each
-- partition instead of three CHECKs on `deliveries` (issue 16). Postgres
-- prepares a table's CHECK expressions anew in every statement that
-- inserts into it (parsing each from the catalog and planning it), and a
-- claim or a result moves its rows by inserting them into another
-- partition: with the three inherited CHECKs a one-row move cost ~30 µs
-- more than without (bench/experiments/claim-overhead, `checks.sh 1`:
-- 20 000 one-row moves in 2.32-2.54 s against 1.78-2.03 s kept this way
-- and 1.70-1.91 s with no constraint at all; in statements of 50 rows the
-- difference is lost in the noise). At light load the engine moves one
-- or two rows a statement.
--
-- Nothing is given up: the state column is checked by the partitions'
-- bounds (a state none lists has no partition and is refused), and each
-- partition says what its own state implies, NOT NULL where it can (no
-- expression to prepare).
ALTER TABLE pending_deliveries
    ADD CONSTRAINT pending_deliveries_not_leased_or_finished
        CHECK (lease_until IS NULL AND finished_at IS NULL);
ALTER TABLE in_flight_deliveries
    ALTER COLUMN lease_until SET NOT NULL,
    ADD CONSTRAINT in_flight_deliveries_not_finished CHECK (finished_at IS NULL);
ALTER TABLE finished_deliveries
    ALTER COLUMN finished_at SET NOT NULL,
    ADD CONSTRAINT finished_deliveries_not_leased CHECK (lease_until IS NULL);

-- By what they are, not by name: 0022 created them unnamed.
DO $$
DECLARE
    c RECORD;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'deliveries'::regclass AND contype = 'c'
    LOOP
        EXECUTE format('ALTER TABLE deliveries DROP CONSTRAINT %I', c.conname);
    END LOOP;
END
$$;
