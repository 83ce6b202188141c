-- Moves `n` deliveries to the in-flight partition and back, `per` rows a
-- statement, as the claim and a retry's result move them.
CREATE FUNCTION bench_moves(n INT, per INT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE k TEXT[];
BEGIN
    FOR i IN 1..n / per LOOP
        k := ARRAY(SELECT 'd' || (1 + ((i * per + g) * 7919) % 20000) || '-' || g % 10
                   FROM generate_series(1, per) g);
        UPDATE deliveries SET state = 'in_flight', lease_until = 1, claimed_at = 1,
            claim_token = 't', updated_at = 1
        WHERE id = ANY(k) AND state = 'pending';
        UPDATE deliveries SET state = 'pending', lease_until = NULL, claimed_at = NULL,
            claim_token = NULL, updated_at = 2
        WHERE id = ANY(k) AND state = 'in_flight';
    END LOOP;
END $$;
