-- pg_wf 1.5 -> 1.6: workflows 2. A running job starts child workflows
-- (wf_start_child) and waits for them (wf_await_children); a step adds
-- steps to its workflow as it completes (wf_complete_with_steps, fan-out);
-- jobs and workflows carry a version, and claims may ask for versions
-- (wf.version_stats shows what each version has left); a running attempt
-- reports its progress (wf_progress); callers wait for a job's or a
-- workflow's result (wf_wait_job, wf_wait_workflow); wf_signal_with_start
-- keeps one active workflow per key. For operators: wf_retry_where and
-- wf_cancel_where act on the matching jobs of a queue, wf_enable_schedule
-- stops and restarts a schedule, and wf.metrics counts what happened per
-- queue since the server started. ALTER EXTENSION pg_wf UPDATE runs this
-- on an existing 1.5; a fresh CREATE EXTENSION runs pg_wf--1.6.sql.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- New columns come last, as in a fresh install's tables.
ALTER TABLE wf.queue_config ADD COLUMN version text COLLATE "C";

ALTER TABLE wf.job
    ADD COLUMN version  text COLLATE "C",
    ADD COLUMN child_of bigint,
    ADD COLUMN progress jsonb;

ALTER TABLE wf.ready ADD COLUMN version text COLLATE "C";
CREATE INDEX ready_version_order ON wf.ready (queue, version, priority DESC, run_at, id)
    WHERE version IS NOT NULL;

ALTER TABLE wf.claim ADD COLUMN progress jsonb;

ALTER TABLE wf.workflow ADD COLUMN key text, ADD COLUMN child_of bigint;

ALTER TABLE wf.schedule ADD COLUMN enabled boolean NOT NULL DEFAULT true;

CREATE TABLE wf.workflow_key (
    key         text PRIMARY KEY,
    workflow_id uuid NOT NULL
);
CREATE TABLE wf.child (
    parent_queue text        NOT NULL,
    parent_id    bigint      NOT NULL,
    name         text        NOT NULL,
    workflow_id  uuid        NOT NULL UNIQUE,
    status       text,
    outcome      jsonb,
    delivered    boolean     NOT NULL DEFAULT false,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (parent_queue, parent_id, name)
);
CREATE INDEX child_parent ON wf.child (parent_id);
CREATE INDEX child_unsettled ON wf.child (workflow_id) WHERE NOT delivered;
SELECT pg_catalog.pg_extension_config_dump('wf.workflow_key', '');
SELECT pg_catalog.pg_extension_config_dump('wf.child', '');
ALTER TABLE wf.workflow_key OWNER TO wf_owner;
ALTER TABLE wf.child OWNER TO wf_owner;

-- Views: wf.jobs and wf.workflows gain columns at their end (their owner
-- and grants stay); wf.version_stats is new.
CREATE OR REPLACE VIEW wf.jobs WITH (security_barrier) AS
SELECT j.id, j.queue, CASE WHEN c.id IS NULL THEN j.status ELSE 'running' END AS status,
       j.payload, j.result, coalesce(c.attempt, j.attempt) AS attempt, j.max_attempts,
       j.priority, j.run_at, j.idempotency_key, j.workflow_id, j.step_name,
       j.depends_on, j.last_error, coalesce(c.worker, j.worker) AS worker,
       c.lease_expires_at, j.created_at, coalesce(c.started_at, j.started_at) AS started_at,
       j.finished_at, c.owner_pid, j.cancel_requested,
       w.event AS waiting_for, j.events, j.key, j.dedup_key, j.max_run_time, j.start_by,
       c.run_deadline, j.version, coalesce(c.progress, j.progress) AS progress, j.child_of
  FROM wf.job j
  LEFT JOIN wf.claim c ON j.status = 'pending' AND c.queue = j.queue AND c.id = j.id
                      AND c.attempt = j.attempt + 1
  LEFT JOIN wf.event_wait w ON j.status = 'waiting' AND w.queue = j.queue AND w.id = j.id
                           AND w.attempt = j.attempt
 WHERE wf._visible(j.queue);

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
       w.cancelled_at, w.key, w.child_of
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

-- One row per queue and version with unfinished jobs: what is left for
-- the workers of each version (jobs without a version show version NULL).
CREATE VIEW wf.version_stats WITH (security_barrier) AS
SELECT queue, version,
       count(*) FILTER (WHERE status = 'blocked') AS blocked,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'waiting') AS waiting,
       now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())
                                                  AS oldest_ready_age
  FROM (SELECT j.queue, j.version, j.run_at,
               CASE WHEN j.status = 'pending' AND NOT EXISTS (
                         SELECT 1 FROM wf.ready r WHERE r.queue = j.queue AND r.priority = j.priority
                            AND r.run_at = j.run_at AND r.id = j.id)
                    THEN 'running' ELSE j.status END AS status
          FROM wf.job j
         WHERE j.status IN ('blocked', 'pending', 'waiting') AND wf._visible(j.queue)) AS v
 GROUP BY queue, version;
ALTER VIEW wf.version_stats OWNER TO wf_owner;
GRANT SELECT ON wf.version_stats TO PUBLIC;

CREATE OR REPLACE VIEW wf.queue_stats WITH (security_barrier) AS
SELECT q.*, CASE WHEN c.rate_limit IS NOT NULL
                 THEN wf._rate_left(q.queue, NULL, c.rate_limit,
                                    coalesce(c.rate_period, interval '1 second')) END AS rate_left,
       coalesce(c.paused, false) AS paused, c.max_running,
       coalesce(c.max_attempts, 5) AS max_attempts, c.lease, c.rate_limit, c.rate_period,
       c.key_rate_limit, c.key_concurrency, coalesce(c.fair, false) AS fair,
       coalesce(c.ordered, false) AS ordered, c.max_run_time, c.version
FROM (SELECT queue,
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
 GROUP BY queue) AS q
LEFT JOIN wf.queue_config c ON c.queue = q.queue;

-- Observe: a right to read, for a dashboard's or an exporter's role.
ALTER TABLE wf.grant DROP CONSTRAINT grant_capability_check,
    ADD CONSTRAINT grant_capability_check
        CHECK (capability IN ('produce', 'work', 'signal', 'operate', 'observe', 'administer'));

CREATE OR REPLACE VIEW wf.schedules WITH (security_barrier) AS
SELECT name, cron, queue, payload, next_run_at AS next_run, last_run_at AS last_run,
       last_job_id, created_at, updated_at, enabled
  FROM wf.schedule
 WHERE wf._visible(queue);

CREATE FUNCTION wf._metrics()
RETURNS TABLE (queue text, enqueued bigint, claimed bigint, completed bigint, failed bigint,
               retried bigint, recovered bigint, cancelled bigint, claim_waits bigint,
               claim_wait_seconds double precision)
AS 'MODULE_PATHNAME', 'wf_metrics' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION wf._metrics() OWNER TO wf_owner;
CREATE VIEW wf.metrics WITH (security_barrier) AS
SELECT m.* FROM wf._metrics() m WHERE wf._visible(m.queue);
ALTER VIEW wf.metrics OWNER TO wf_owner;
GRANT SELECT ON wf.metrics TO PUBLIC;

-- Four functions take new arguments. The roles that could run the old
-- ones (wf_grant gave them EXECUTE) can run the new ones.
-- A table of the schema, dropped below, not a temporary one: on Citus the
-- script also runs on the workers inside a prepared transaction, which
-- may not touch temporary objects.
CREATE TABLE wf._old_grants AS
SELECT p.proname::text AS name, a.grantee::regrole::text AS grantee
  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
 WHERE p.oid IN ('wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz)'::pg_catalog.regprocedure,
                 'wf_claim(text, text, int, interval, interval)'::pg_catalog.regprocedure,
                 'wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval)'::pg_catalog.regprocedure,
                 'wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval)'::pg_catalog.regprocedure)
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
   AND a.grantee <> 'wf_owner'::regrole;

DROP FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz);
DROP FUNCTION wf_claim(text, text, int, interval, interval);
DROP FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval);
DROP FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval);

CREATE FUNCTION wf_enqueue(queue text, payload jsonb DEFAULT '{}',
                           run_at timestamptz DEFAULT NULL, priority int DEFAULT 0,
                           max_attempts int DEFAULT NULL, idempotency_key text DEFAULT NULL,
                           workflow_id uuid DEFAULT NULL, step_name text DEFAULT NULL,
                           depends_on bigint[] DEFAULT NULL, key text DEFAULT NULL,
                           dedup_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
                           max_run_time interval DEFAULT NULL,
                           start_by timestamptz DEFAULT NULL, version text DEFAULT NULL)
RETURNS bigint AS 'MODULE_PATHNAME', 'wf_enqueue' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

-- checkpoints and events: what the job already has from wf_checkpoint and
-- wf_signal (and its children's outcomes); both NULL on a job's first claim.
-- versions: only jobs of these versions (NULL: any job).
CREATE FUNCTION wf_claim(queue text, worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                         lease interval DEFAULT NULL, wait interval DEFAULT NULL,
                         versions text[] DEFAULT NULL)
RETURNS TABLE (id bigint, attempt int, queue text, payload jsonb, workflow_id uuid,
               step_name text, priority int, max_attempts int, idempotency_key text,
               inputs jsonb, lease_expires_at timestamptz, checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_complete_and_claim(queue text, id bigint, attempt int, result jsonb DEFAULT NULL,
                                      worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                                      lease interval DEFAULT NULL, versions text[] DEFAULT NULL)
RETURNS TABLE (completed boolean, id bigint, attempt int, queue text, payload jsonb,
               workflow_id uuid, step_name text, priority int, max_attempts int,
               idempotency_key text, inputs jsonb, lease_expires_at timestamptz,
               checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_complete_and_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_configure_queue(queue text, max_attempts int DEFAULT NULL,
                                   backoff_base interval DEFAULT NULL,
                                   backoff_max interval DEFAULT NULL,
                                   lease interval DEFAULT NULL, max_running int DEFAULT NULL,
                                   paused boolean DEFAULT NULL, rate_limit int DEFAULT NULL,
                                   rate_period interval DEFAULT NULL,
                                   key_rate_limit int DEFAULT NULL,
                                   key_concurrency int DEFAULT NULL, fair boolean DEFAULT NULL,
                                   ordered boolean DEFAULT NULL,
                                   max_run_time interval DEFAULT NULL,
                                   version text DEFAULT NULL)
RETURNS void AS 'MODULE_PATHNAME', 'wf_configure_queue' LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- The new functions (what each does: sql/pg_wf.sql).
CREATE FUNCTION wf_start_child(queue text, id bigint, attempt int, name text, spec jsonb)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_start_child' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_await_children(queue text, id bigint, attempt int,
                                  timeout interval DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_await_children' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_complete_with_steps(queue text, id bigint, attempt int, result jsonb,
                                       steps jsonb)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_complete_with_steps' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_progress(queue text, id bigint, attempt int, progress jsonb)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_progress' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_wait_job(queue text, id bigint, timeout interval DEFAULT '30 seconds')
RETURNS TABLE (status text, result jsonb, error text)
AS 'MODULE_PATHNAME', 'wf_wait_job' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_wait_workflow(workflow_id uuid, timeout interval DEFAULT '30 seconds')
RETURNS TABLE (status text, result jsonb, error text)
AS 'MODULE_PATHNAME', 'wf_wait_workflow' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_signal_with_start(spec jsonb, event text, payload jsonb DEFAULT NULL)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_signal_with_start' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_retry_where(queue text, ids bigint[] DEFAULT NULL,
                               error_contains text DEFAULT NULL, max_jobs int DEFAULT 1000)
RETURNS int AS 'MODULE_PATHNAME', 'wf_retry_where' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_cancel_where(queue text, ids bigint[] DEFAULT NULL,
                                error_contains text DEFAULT NULL, statuses text[] DEFAULT NULL,
                                max_jobs int DEFAULT 1000)
RETURNS int AS 'MODULE_PATHNAME', 'wf_cancel_where' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION wf_enable_schedule(name text, enabled boolean)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_enable_schedule' LANGUAGE C VOLATILE
SET jit = off
SET search_path = pg_catalog, pg_temp;

ALTER FUNCTION wf_retry_where(text, bigint[], text, int) OWNER TO wf_owner;
ALTER FUNCTION wf_cancel_where(text, bigint[], text, text[], int) OWNER TO wf_owner;
ALTER FUNCTION wf_enable_schedule(text, boolean) OWNER TO wf_owner;
REVOKE EXECUTE ON FUNCTION wf_retry_where(text, bigint[], text, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_cancel_where(text, bigint[], text, text[], int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_enable_schedule(text, boolean) FROM PUBLIC;
ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text) OWNER TO wf_owner;
ALTER FUNCTION wf_claim(text, text, int, interval, interval, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text) OWNER TO wf_owner;
ALTER FUNCTION wf_start_child(text, bigint, int, text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_await_children(text, bigint, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_with_steps(text, bigint, int, jsonb, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_progress(text, bigint, int, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_wait_job(text, bigint, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_wait_workflow(uuid, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_signal_with_start(jsonb, text, jsonb) OWNER TO wf_owner;
REVOKE EXECUTE ON FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_claim(text, text, int, interval, interval, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_start_child(text, bigint, int, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_await_children(text, bigint, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_with_steps(text, bigint, int, jsonb, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_progress(text, bigint, int, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_wait_job(text, bigint, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_wait_workflow(uuid, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_signal_with_start(jsonb, text, jsonb) FROM PUBLIC;

DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT name, grantee FROM wf._old_grants LOOP
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s',
      CASE g.name
        WHEN 'wf_enqueue' THEN 'wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text)'
        WHEN 'wf_claim' THEN 'wf_claim(text, text, int, interval, interval, text[])'
        WHEN 'wf_complete_and_claim' THEN 'wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[])'
        ELSE 'wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text)'
      END, g.grantee);
  END LOOP;
END $$;
DROP TABLE wf._old_grants;

-- The new functions open to the capabilities that already hold grants
-- (src/pg/api/rights.cpp, kFunctions): a role granted a capability under
-- 1.5 may run what wf_grant gives that capability in 1.6.
DO $$
DECLARE
  g record;
  f text;
BEGIN
  FOR g IN SELECT DISTINCT grantee::regrole::text AS grantee, capability FROM wf.grant
            ORDER BY 1, 2 LOOP
    FOREACH f IN ARRAY CASE g.capability
        WHEN 'produce' THEN ARRAY['wf_signal_with_start(jsonb, text, jsonb)',
                                  'wf_wait_job(text, bigint, interval)',
                                  'wf_wait_workflow(uuid, interval)']
        WHEN 'work' THEN ARRAY['wf_start_child(text, bigint, int, text, jsonb)',
                               'wf_await_children(text, bigint, int, interval)',
                               'wf_complete_with_steps(text, bigint, int, jsonb, jsonb)',
                               'wf_progress(text, bigint, int, jsonb)']
        WHEN 'operate' THEN ARRAY['wf_wait_job(text, bigint, interval)',
                                  'wf_wait_workflow(uuid, interval)',
                                  'wf_retry_where(text, bigint[], text, int)',
                                  'wf_cancel_where(text, bigint[], text, text[], int)']
        WHEN 'administer' THEN ARRAY['wf_signal_with_start(jsonb, text, jsonb)',
                                     'wf_wait_job(text, bigint, interval)',
                                     'wf_wait_workflow(uuid, interval)',
                                     'wf_start_child(text, bigint, int, text, jsonb)',
                                     'wf_await_children(text, bigint, int, interval)',
                                     'wf_complete_with_steps(text, bigint, int, jsonb, jsonb)',
                                     'wf_progress(text, bigint, int, jsonb)',
                                     'wf_retry_where(text, bigint[], text, int)',
                                     'wf_cancel_where(text, bigint[], text, text[], int)',
                                     'wf_enable_schedule(text, boolean)']
        ELSE ARRAY[]::text[]
      END LOOP
      EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g.grantee);
    END LOOP;
  END LOOP;
END $$;

-- Privileges granted by an extension's script are recorded as its initial
-- privileges, which pg_dump leaves out. Those grants belong to the roles,
-- not to pg_wf: the initial privileges of the functions above are what a
-- fresh install gives them, so that a dump keeps the grants above.
UPDATE pg_catalog.pg_init_privs
   SET initprivs = '{wf_owner=X/wf_owner}'
 WHERE classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND objsubid = 0
   AND objoid IN ('wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text)'::pg_catalog.regprocedure,
                  'wf_claim(text, text, int, interval, interval, text[])'::pg_catalog.regprocedure,
                  'wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[])'::pg_catalog.regprocedure,
                  'wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text)'::pg_catalog.regprocedure,
                  'wf_start_child(text, bigint, int, text, jsonb)'::pg_catalog.regprocedure,
                  'wf_await_children(text, bigint, int, interval)'::pg_catalog.regprocedure,
                  'wf_complete_with_steps(text, bigint, int, jsonb, jsonb)'::pg_catalog.regprocedure,
                  'wf_progress(text, bigint, int, jsonb)'::pg_catalog.regprocedure,
                  'wf_wait_job(text, bigint, interval)'::pg_catalog.regprocedure,
                  'wf_wait_workflow(uuid, interval)'::pg_catalog.regprocedure,
                  'wf_signal_with_start(jsonb, text, jsonb)'::pg_catalog.regprocedure,
                  'wf_retry_where(text, bigint[], text, int)'::pg_catalog.regprocedure,
                  'wf_cancel_where(text, bigint[], text, text[], int)'::pg_catalog.regprocedure,
                  'wf_enable_schedule(text, boolean)'::pg_catalog.regprocedure);
