-- pg_wf 1.7 -> 1.8: a distributed pg_wf serves events, schedules and wf_sweep.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- 1.8: a distributed pg_wf's own calls into one shard group (a signal's
-- wake-up, a schedule's tick, a sweep by hand), which Citus sends to the
-- group's node (src/pg/citus/cluster_calls.hpp). pg_wf makes them as the
-- bootstrap superuser; anyone else is refused.
CREATE FUNCTION wf._wake_event(queue text, event text, payload jsonb) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_wake_event' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._fire_tick(queue text, payload jsonb, run_at timestamptz,
                              idempotency_key text) RETURNS bigint
AS 'MODULE_PATHNAME', 'wf_group_fire_tick' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._sweep_group(queue text) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_sweep' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._wake_event(text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._fire_tick(text, jsonb, timestamptz, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._sweep_group(text) FROM PUBLIC;
