-- pg_wf 1.3 -> 1.4: the functions are the only door, and nothing pg_wf runs
-- can be made to run someone else's code. pg_wf's objects move to the role
-- wf_owner, as which its SQL runs; rights are granted per queue (wf_grant);
-- EXECUTE is no longer granted to PUBLIC (see the README's upgrade notes for
-- what to grant afterwards); the views show a role only its queues. Every function resolves names in pg_catalog only (a function or
-- operator planted in another schema, say public, was what its SQL called),
-- and nothing may be attached to pg_wf's tables (an event trigger refuses
-- triggers, rules and row security there; what is attached anyway stops
-- pg_wf until it is removed). ALTER EXTENSION pg_wf UPDATE runs this on an
-- existing 1.3; a fresh CREATE EXTENSION runs pg_wf--1.4.sql.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- pg_wf's owner: the role that owns schema wf, its tables and functions,
-- and as which every function and the background worker run pg_wf's SQL
-- (src/pg/runtime/run_as.hpp). It cannot log in and is no superuser, so
-- nothing that runs inside pg_wf has more than its rights. Roles are shared
-- by the databases of a cluster: the first CREATE EXTENSION creates it.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'wf_owner') THEN
    CREATE ROLE wf_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
  ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'wf_owner'
                   AND (rolcanlogin OR rolsuper OR rolbypassrls OR rolcreaterole)) THEN
    RAISE EXCEPTION 'role wf_owner exists with rights pg_wf''s owner must not have'
      USING ERRCODE = '42501',
            HINT = 'pg_wf owns its objects as wf_owner: make it NOLOGIN NOSUPERUSER NOCREATEROLE NOBYPASSRLS.';
  END IF;
END $$;


-- Existing schedules fire with the rights of the extension's owner, who
-- made them possible.
ALTER TABLE wf.schedule ADD COLUMN owner regrole;
UPDATE wf.schedule SET owner = (SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'pg_wf');
ALTER TABLE wf.schedule ALTER COLUMN owner SET NOT NULL;

-- Who may do what, per queue (wf_grant; src/pg/api/rights.hpp). `queues` is
-- a queue name, or a pattern whose trailing * matches any rest ('*': every
-- queue). For capability signal it names events.
CREATE TABLE wf.grant (
    grantee    regrole     NOT NULL,
    capability text        NOT NULL
               CHECK (capability IN ('produce', 'work', 'signal', 'operate', 'administer')),
    queues     text        NOT NULL CHECK (queues <> ''),
    granted_by regrole     NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (grantee, capability, queues)
);

SELECT pg_catalog.pg_extension_config_dump('wf.grant', '');

ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_enqueue_batch(text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_claim(text, text, int, interval, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_heartbeat(text, bigint, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete(text, bigint, int, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_fail(text, bigint, int, text, interval, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_retry(text, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_cancel(text, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_sweep() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_recover_lost_claims() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_submit(jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_workflow(uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_cancel_workflow(uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_checkpoint(text, bigint, int, text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_snooze(text, bigint, int, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_await_event(text, bigint, int, text, interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_signal(text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_schedule(text, text, text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf_unschedule(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf._after_create() SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf._refuse_attachment() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'wf_refuse_attachment' LANGUAGE C
SET search_path = pg_catalog, pg_temp;
CREATE EVENT TRIGGER wf_guard ON ddl_command_start
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE RULE', 'CREATE POLICY', 'ALTER POLICY', 'ALTER TABLE')
    EXECUTE FUNCTION wf._refuse_attachment();

-- The views show a role the queues it holds any right on (every queue for
-- a superuser). They are security barriers: a function in the caller's
-- query sees no row of another queue.
CREATE FUNCTION wf._visible(queue text) RETURNS boolean
AS 'MODULE_PATHNAME', 'wf_visible' LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
CREATE FUNCTION wf._administers(queues text) RETURNS boolean
AS 'MODULE_PATHNAME', 'wf_administers' LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;

-- One row per job. Status, attempt, worker, start and owner of a running job
-- come from its claim (the job row says pending, one attempt behind).
CREATE OR REPLACE VIEW wf.jobs WITH (security_barrier) AS
SELECT j.id, j.queue, CASE WHEN c.id IS NULL THEN j.status ELSE 'running' END AS status,
       j.payload, j.result, coalesce(c.attempt, j.attempt) AS attempt, j.max_attempts,
       j.priority, j.run_at, j.idempotency_key, j.workflow_id, j.step_name,
       j.depends_on, j.last_error, coalesce(c.worker, j.worker) AS worker,
       c.lease_expires_at, j.created_at, coalesce(c.started_at, j.started_at) AS started_at,
       j.finished_at, c.owner_pid, j.cancel_requested,
       w.event AS waiting_for, j.events
  FROM wf.job j
  LEFT JOIN wf.claim c ON j.status = 'pending' AND c.queue = j.queue AND c.id = j.id
                      AND c.attempt = j.attempt + 1
  LEFT JOIN wf.event_wait w ON j.status = 'waiting' AND w.queue = j.queue AND w.id = j.id
                           AND w.attempt = j.attempt
 WHERE wf._visible(j.queue);

-- The status the counting views show, from logged tables only, so that
-- they work on a hot standby too (wf.jobs does not: unlogged tables cannot
-- be read there): a pending job without its ready row is running (or its
-- claim was lost and awaits recovery).
CREATE OR REPLACE VIEW wf.job_states WITH (security_barrier) AS
SELECT j.queue, j.id, j.workflow_id, j.run_at, j.created_at, j.finished_at,
       CASE WHEN j.status = 'pending' AND NOT EXISTS (
                 SELECT 1 FROM wf.ready r WHERE r.queue = j.queue AND r.priority = j.priority
                    AND r.run_at = j.run_at AND r.id = j.id)
            THEN 'running' ELSE j.status END AS status
  FROM wf.job j
 WHERE wf._visible(j.queue);

-- One row per queue: a configured queue without jobs shows zeros.
CREATE OR REPLACE VIEW wf.queue_stats WITH (security_barrier) AS
SELECT queue,
       count(*) FILTER (WHERE status = 'blocked')   AS blocked,
       count(*) FILTER (WHERE status = 'pending')   AS pending,
       count(*) FILTER (WHERE status = 'running')   AS running,
       count(*) FILTER (WHERE status = 'waiting')   AS waiting,
       count(*) FILTER (WHERE status = 'done')      AS done,
       count(*) FILTER (WHERE status = 'failed')    AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
       now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())
                                                    AS oldest_ready_age
  FROM (SELECT queue, status, run_at FROM wf.job_states
        UNION ALL
        SELECT queue, NULL, NULL FROM wf.queue_config WHERE wf._visible(queue)) AS q
 GROUP BY queue;

-- One row per workflow: steps of one workflow_id, from wf_submit or from
-- wf_enqueue(workflow_id => ...).
CREATE OR REPLACE VIEW wf.workflows WITH (security_barrier) AS
SELECT s.workflow_id, w.name,
       CASE WHEN s.blocked + s.pending + s.running + s.waiting > 0 THEN 'running'
            WHEN s.failed > 0 THEN 'failed'
            WHEN s.cancelled > 0 THEN 'cancelled'
            ELSE 'done' END AS status,
       s.steps, s.blocked, s.pending, s.running, s.waiting, s.done, s.failed, s.cancelled,
       coalesce(w.submitted_at, s.first_created) AS started_at,
       CASE WHEN s.blocked + s.pending + s.running + s.waiting = 0 THEN s.last_finished END
           AS finished_at,
       w.cancelled_at
  FROM (SELECT workflow_id, count(*) AS steps,
               count(*) FILTER (WHERE status = 'blocked')   AS blocked,
               count(*) FILTER (WHERE status = 'pending')   AS pending,
               count(*) FILTER (WHERE status = 'running')   AS running,
               count(*) FILTER (WHERE status = 'waiting')   AS waiting,
               count(*) FILTER (WHERE status = 'done')      AS done,
               count(*) FILTER (WHERE status = 'failed')    AS failed,
               count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
               min(created_at) AS first_created, max(finished_at) AS last_finished
          FROM wf.job_states WHERE workflow_id IS NOT NULL
         GROUP BY workflow_id) AS s
  LEFT JOIN wf.workflow w ON w.id = s.workflow_id;

CREATE OR REPLACE VIEW wf.schedules WITH (security_barrier) AS
SELECT name, cron, queue, payload, next_run_at AS next_run, last_run_at AS last_run,
       last_job_id, created_at, updated_at
  FROM wf.schedule
 WHERE wf._visible(queue);

-- The grants a role may see: its own (and its roles'), and those on queues
-- it administers.
CREATE VIEW wf.grants WITH (security_barrier) AS
SELECT grantee, capability, queues, granted_by, granted_at
  FROM wf.grant
 WHERE pg_catalog.pg_has_role(grantee, 'USAGE') OR wf._administers(queues);

-- Rights per queue (src/pg/api/rights.hpp).

-- Grants a role a capability ('produce', 'work', 'signal', 'operate',
-- 'administer') on a queue or pattern, and EXECUTE on the functions that
-- use it. True if it is new. The caller must administer those queues.
CREATE FUNCTION wf_grant(role regrole, capability text, queues text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_grant' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- Takes a grant back (and EXECUTE on functions the role no longer needs).
CREATE FUNCTION wf_revoke(role regrole, capability text, queues text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_revoke' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- Everything pg_wf's SQL touches belongs to wf_owner, as which it runs.
-- The functions are the only door: nobody holds a privilege on the tables,
-- EXECUTE goes to the roles wf_grant names, and the views (which filter
-- their rows by the reader's rights) and the schema are open to all.
ALTER SCHEMA wf OWNER TO wf_owner;
ALTER TABLE wf.queue_config OWNER TO wf_owner;
ALTER TABLE wf.job OWNER TO wf_owner;
ALTER TABLE wf.ready OWNER TO wf_owner;
ALTER TABLE wf.claim OWNER TO wf_owner;
ALTER TABLE wf.dependency OWNER TO wf_owner;
ALTER TABLE wf.release_debt OWNER TO wf_owner;
ALTER TABLE wf.workflow OWNER TO wf_owner;
ALTER TABLE wf.checkpoint OWNER TO wf_owner;
ALTER TABLE wf.event OWNER TO wf_owner;
ALTER TABLE wf.event_wait OWNER TO wf_owner;
ALTER TABLE wf.schedule OWNER TO wf_owner;
ALTER TABLE wf.grant OWNER TO wf_owner;
ALTER VIEW wf.jobs OWNER TO wf_owner;
ALTER VIEW wf.job_states OWNER TO wf_owner;
ALTER VIEW wf.queue_stats OWNER TO wf_owner;
ALTER VIEW wf.workflows OWNER TO wf_owner;
ALTER VIEW wf.schedules OWNER TO wf_owner;
ALTER VIEW wf.grants OWNER TO wf_owner;
GRANT USAGE ON SCHEMA wf TO PUBLIC;
GRANT SELECT ON wf.jobs, wf.job_states, wf.queue_stats, wf.workflows, wf.schedules, wf.grants
   TO PUBLIC;
ALTER FUNCTION wf._visible(text) OWNER TO wf_owner;
ALTER FUNCTION wf._administers(text) OWNER TO wf_owner;
ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]) OWNER TO wf_owner;
ALTER FUNCTION wf_enqueue_batch(text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_claim(text, text, int, interval, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_heartbeat(text, bigint, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_complete(text, bigint, int, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) OWNER TO wf_owner;
ALTER FUNCTION wf_fail(text, bigint, int, text, interval, boolean) OWNER TO wf_owner;
ALTER FUNCTION wf_retry(text, bigint) OWNER TO wf_owner;
ALTER FUNCTION wf_cancel(text, bigint) OWNER TO wf_owner;
ALTER FUNCTION wf_sweep() OWNER TO wf_owner;
ALTER FUNCTION wf_recover_lost_claims() OWNER TO wf_owner;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean) OWNER TO wf_owner;
ALTER FUNCTION wf_submit(jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_workflow(uuid) OWNER TO wf_owner;
ALTER FUNCTION wf_cancel_workflow(uuid) OWNER TO wf_owner;
ALTER FUNCTION wf_checkpoint(text, bigint, int, text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_snooze(text, bigint, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_await_event(text, bigint, int, text, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_signal(text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_schedule(text, text, text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_unschedule(text) OWNER TO wf_owner;
ALTER FUNCTION wf_grant(regrole, text, text) OWNER TO wf_owner;
ALTER FUNCTION wf_revoke(regrole, text, text) OWNER TO wf_owner;
REVOKE EXECUTE ON FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_enqueue_batch(text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_claim(text, text, int, interval, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_heartbeat(text, bigint, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete(text, bigint, int, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_fail(text, bigint, int, text, interval, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_retry(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_cancel(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_sweep() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_recover_lost_claims() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_submit(jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_workflow(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_cancel_workflow(uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_checkpoint(text, bigint, int, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_snooze(text, bigint, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_await_event(text, bigint, int, text, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_signal(text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_schedule(text, text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_unschedule(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_grant(regrole, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_revoke(regrole, text, text) FROM PUBLIC;

