-- A claim answers with what its attempts need: each delivery's event and,
-- once per endpoint, the endpoint's row (issue 16). The engine read both
-- after every claim, in two more statements on the way of every first
-- attempt. At 10 % load a round carries one or two deliveries, so they
-- were two of the seven statements an event cost, and Postgres planned
-- the events read afresh on a third of its calls (1 872 plans for 5 619
-- calls, 0.14 ms each against 0.03 ms of execution).
--
-- The claim itself is 0031's dakghar_claim_round, called as it is. Its
-- rows are joined in a second statement, whose snapshot is taken after
-- the claim's: a delivery's event and endpoint were committed before the
-- claim could see the delivery, so both are found unless deleted since
-- (then the engine reads again, and finds nothing to send, as before).
-- The endpoint travels as JSON text: its columns would clash by name with
-- the delivery's, and a row that does not decode must hold back only its
-- own endpoint's deliveries.
CREATE FUNCTION dakghar_claim_with_inputs(p_now BIGINT, p_lease_until BIGINT, p_limit BIGINT,
    p_token TEXT, p_default_rate BIGINT, p_host_cap BIGINT)
RETURNS TABLE (held_back BOOLEAN, claimed deliveries, event events, endpoint TEXT)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
DECLARE
    held BOOLEAN;
    taken deliveries[];
BEGIN
    SELECT bool_or(c.held_back), array_agg(c.claimed) FILTER (WHERE (c.claimed).id IS NOT NULL)
    INTO held, taken
    FROM dakghar_claim_round(p_now, p_lease_until, p_limit, p_token, p_default_rate,
        p_host_cap) c;
    IF taken IS NULL THEN
        IF held THEN
            RETURN QUERY SELECT true, NULL::deliveries, NULL::events, NULL::TEXT;
        END IF;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT held, d, e,
            CASE WHEN row_number() OVER (PARTITION BY d.endpoint_id) = 1
                THEN row_to_json(ep)::TEXT END
        FROM unnest(taken) d
        LEFT JOIN events e ON e.account_id = d.account_id AND e.id = d.event_id
        LEFT JOIN endpoints ep ON ep.id = d.endpoint_id;
END
$$;
