-- pg_wf 1.8 -> 1.9: child workflows on a distributed pg_wf.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- 1.9: what a call leaves for its node's worker also names a child
-- workflow: 'child', a step of child workflow workflow_id ended (the worker
-- records its outcome once it is over and delivers it to its parent's
-- group); 'cancel_child', its parent was cancelled (the worker cancels it
-- in every group).
ALTER TABLE wf.outbox ADD COLUMN workflow_id uuid;
ALTER TABLE wf.outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE wf.outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('subscribe', 'ended', 'child', 'cancel_child'));

-- 1.9: in the parent's shard group, a child workflow's outcome joins its
-- parent's events, and a parent parked in wf_await_children with nothing
-- else to wait for goes back to pending (called by the node's worker).
CREATE FUNCTION wf._deliver_child(queue text, parent_id bigint, workflow_id uuid,
                                  name text, outcome jsonb) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_deliver_child' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._deliver_child(text, bigint, uuid, text, jsonb) FROM PUBLIC;
-- 1.9: wf._cancel_workflow for the worker (a cancelled parent's child).
CREATE FUNCTION wf._cancel_child(queue text, workflow_id uuid) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_cancel_child' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION wf._cancel_child(text, uuid) FROM PUBLIC;
