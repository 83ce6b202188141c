-- Every delivery is updated twice (claimed, then finished), so the table
-- churns fast. Vacuum and analyze it after 2 % of its rows changed rather
-- than the default 20 %: dead entries in the in-flight and due indexes are
-- cleared sooner, and the planner sees a fresh backlog's real size.
ALTER TABLE deliveries SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
