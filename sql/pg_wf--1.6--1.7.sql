-- pg_wf 1.6 -> 1.7: pg_wf on Citus.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- Logical replication (a publication, Citus moving a shard) names a
-- deleted ready row by its claim order.
ALTER TABLE wf.ready REPLICA IDENTITY USING INDEX ready_claim_order;

-- On a distributed pg_wf (1.7), the sentinel of each shard group placed on
-- this node: a table of the node's own, never distributed (see
-- recover_group_orphans in job_state.cpp).
CREATE UNLOGGED TABLE wf.group_sentinel (
    job_shard bigint PRIMARY KEY  -- the group's shard of wf.job
);
ALTER TABLE wf.group_sentinel OWNER TO wf_owner;

-- The grantee's name: Citus copies a reference table's OIDs as they are,
-- and a role's OID differs from node to node; its name does not. A
-- distributed pg_wf checks rights by name.
ALTER TABLE wf.grant ADD COLUMN grantee_name text;
UPDATE wf.grant g SET grantee_name = r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee;
DELETE FROM wf.grant WHERE grantee_name IS NULL;  -- roles dropped since (none: regrole)
ALTER TABLE wf.grant ALTER COLUMN grantee_name SET NOT NULL;

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

