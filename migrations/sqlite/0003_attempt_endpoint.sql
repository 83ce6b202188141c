-- Health numbers (success rate, latency, attempts per hour) are read per
-- endpoint and time window; keeping the endpoint on the attempt lets one
-- index answer them without joining every delivery.
ALTER TABLE attempts ADD COLUMN endpoint_id TEXT;
UPDATE attempts SET endpoint_id = (SELECT endpoint_id FROM deliveries WHERE deliveries.id = attempts.delivery_id);
CREATE INDEX attempts_endpoint_started ON attempts (endpoint_id, started_at);
CREATE INDEX deliveries_endpoint_waiting ON deliveries (endpoint_id) WHERE state IN ('pending', 'in_flight');
