-- The ingest span's W3C traceparent when traces are exported
-- (--otlp-endpoint): claims and attempts, on any node, join its trace.
ALTER TABLE events ADD COLUMN traceparent TEXT;
