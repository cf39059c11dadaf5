-- pg_wf 1.6 -> 1.7: pg_wf on Citus.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- Logical replication (a publication, Citus moving a shard) names a
-- deleted ready row by its claim order.
ALTER TABLE wf.ready REPLICA IDENTITY USING INDEX ready_claim_order;

-- 1.7: pg_wf on Citus (src/pg/citus/). Run by a superuser on the
-- coordinator; they run as their caller (Citus's functions need its rights).
CREATE FUNCTION wf_distribute() RETURNS void
AS 'MODULE_PATHNAME', 'wf_distribute' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._take_id_range() RETURNS void
AS 'MODULE_PATHNAME', 'wf_take_id_range' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf_distribute() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._take_id_range() FROM PUBLIC;

