-- Each endpoint's oldest due deliveries in index order: claims take a few
-- rows per endpoint instead of ranking the whole backlog.
CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at, id) WHERE state = 'pending';
