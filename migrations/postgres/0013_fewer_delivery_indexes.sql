-- A claim or a result changes a delivery's state, which index predicates
-- read, so neither is ever a HOT update: each writes a new entry into
-- every index on deliveries. Three of them duplicated others:
-- every read of pending rows by endpoint or in all is served by
-- deliveries_endpoint_due; in-flight rows are few (what the nodes hold)
-- and deliveries_in_flight finds them all, leases included.
DROP INDEX deliveries_due;
DROP INDEX deliveries_endpoint_waiting;
DROP INDEX deliveries_leased;
