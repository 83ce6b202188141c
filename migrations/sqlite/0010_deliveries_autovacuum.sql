-- Postgres tunes autovacuum for deliveries at this version; SQLite has no
-- such setting. Kept so both backends count the same versions.
SELECT 1;
