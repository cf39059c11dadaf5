-- pg_wf 1.7 -> 1.8: a distributed pg_wf serves events, schedules, wf_sweep and
-- dependencies between shard groups.
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

-- 1.8, dependencies between shard groups on a distributed pg_wf
-- (src/pg/jobs/remote_dependencies.cpp). A job's dependency in another
-- group is recorded on both sides: its edge in wf.dependency (by the
-- child's queue, as any edge), and the child in wf.remote_dependent (by the
-- parent's queue), which the parent's end reads. Results of such parents,
-- delivered to the child's group, are the child's inputs. On one server
-- they stay empty.
CREATE TABLE wf.remote_dependent (
    parent_queue text   NOT NULL,
    parent_id    bigint NOT NULL,
    child_queue  text   NOT NULL,
    child_id     bigint NOT NULL,
    -- The parent's id first: a parent's end looks its dependents up by id.
    PRIMARY KEY (parent_id, parent_queue, child_queue, child_id)
);
CREATE TABLE wf.remote_input (
    child_queue text   NOT NULL,
    child_id    bigint NOT NULL,
    parent_id   bigint NOT NULL,
    name        text   NOT NULL,  -- the parent's step name, or its id
    result      jsonb,
    PRIMARY KEY (child_queue, child_id, parent_id)
);
-- What a call left for its node's worker to take to other shard groups, in
-- the call's own transaction: a table of the node's own, never distributed.
-- 'subscribe': job (child_queue, child_id) waits on parent_ids, in groups
-- not yet known (role_name enqueued it); 'ended': job parent_ids[1] of
-- parent_queue ended.
CREATE TABLE wf.outbox (
    id           bigserial PRIMARY KEY,
    kind         text     NOT NULL CHECK (kind IN ('subscribe', 'ended')),
    parent_queue text,
    parent_ids   bigint[] NOT NULL,
    child_queue  text,
    child_id     bigint,
    role_name    text,
    made_at      timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('wf.remote_dependent', '');
SELECT pg_catalog.pg_extension_config_dump('wf.remote_input', '');
SELECT pg_catalog.pg_extension_config_dump('wf.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('wf.outbox_id_seq', '');
ALTER TABLE wf.remote_dependent OWNER TO wf_owner;
ALTER TABLE wf.remote_input OWNER TO wf_owner;
ALTER TABLE wf.outbox OWNER TO wf_owner;

-- Their calls into a group: a child's subscription to its parent (in the
-- parent's group; the parent's status), a parent's end (in the child's).
CREATE FUNCTION wf._subscribe(queue text, parent_id bigint, child_queue text, child_id bigint)
RETURNS text AS 'MODULE_PATHNAME', 'wf_group_subscribe' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._parent_ended(queue text, parent_id bigint, status text, result jsonb, name text,
                                 children bigint[])
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_parent_ended' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._subscribe(text, bigint, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._parent_ended(text, bigint, text, jsonb, text, bigint[]) FROM PUBLIC;
-- In the parent's group, once it has ended: its end and its dependents in
-- other groups, taken (deleted) under its lock.
CREATE FUNCTION wf._take_dependents(queue text, parent_id bigint) RETURNS jsonb
AS 'MODULE_PATHNAME', 'wf_group_take_dependents' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._take_dependents(text, bigint) FROM PUBLIC;

-- 1.8, workflows on a distributed pg_wf: one shard group's steps of a
-- workflow wf_submit makes, and wf_cancel_workflow in one group.
CREATE FUNCTION wf._insert_steps(queue text, workflow_id uuid, steps jsonb, role text)
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_insert_steps' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._cancel_workflow(queue text, workflow_id uuid)
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_cancel_workflow' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._insert_steps(text, uuid, jsonb, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._cancel_workflow(text, uuid) FROM PUBLIC;
CREATE FUNCTION wf._recover_lost_claims(queue text) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_recover_lost_claims' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._recover_lost_claims(text) FROM PUBLIC;
