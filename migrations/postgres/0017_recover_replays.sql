-- A customer's recovery of one endpoint's failures is a replay of its own
-- kind in the audit log.
ALTER TABLE replays DROP CONSTRAINT replays_kind_check;
ALTER TABLE replays ADD CONSTRAINT replays_kind_check CHECK (kind IN ('single', 'bulk', 'recover'));
