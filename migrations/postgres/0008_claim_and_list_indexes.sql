-- Every claim counts each endpoint's in-flight deliveries; without this
-- small partial index SQLite counted them by scanning the whole table.
CREATE INDEX deliveries_in_flight ON deliveries (endpoint_id) WHERE state = 'in_flight';

-- The events list filtered by endpoint walks that endpoint's deliveries
-- newest first, in the list's own order (created_at, then event id).
DROP INDEX deliveries_endpoint_created;
CREATE INDEX deliveries_endpoint_created ON deliveries (endpoint_id, created_at, event_id);
