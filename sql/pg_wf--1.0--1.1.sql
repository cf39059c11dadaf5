-- pg_wf 1.0 -> 1.1: workflows. Whole DAGs submitted in one call, step
-- checkpoints, durable sleep, events, cron schedules. CREATE EXTENSION runs
-- pg_wf--1.0.sql and then this file; ALTER EXTENSION pg_wf UPDATE runs this.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- Events delivered to a parked job ({"<event>": {"status": ..., "payload": ...}}),
-- handed back by its next claims.
ALTER TABLE wf.job ADD COLUMN events jsonb;

-- No CHECK constraints on the hot table: PostgreSQL parses and prepares a
-- table's CHECK expressions again for every statement that writes it, which
-- cost about 5% of each enqueue, claim and completion. Every write of
-- wf.job goes through pg_wf's functions, which only write valid statuses
-- and a positive max_attempts (wf_enqueue and wf_submit check it).
ALTER TABLE wf.job DROP CONSTRAINT job_status_check,
                   DROP CONSTRAINT job_max_attempts_check;

-- workflow_id never changes after insert, so this index keeps claims and
-- completions HOT.
CREATE INDEX job_workflow ON wf.job (workflow_id) WHERE workflow_id IS NOT NULL;

-- One row per wf_submit call: what the steps of one workflow_id have in common.
CREATE TABLE wf.workflow (
    id           uuid        PRIMARY KEY,
    name         text,
    steps        int         NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz
);

-- Outputs of steps run inside one job (wf_checkpoint), returned by the
-- job's later claims so a resumed worker skips what it finished.
CREATE TABLE wf.checkpoint (
    queue       text        NOT NULL,
    job_id      bigint      NOT NULL,
    step        text        NOT NULL,
    output      jsonb,
    attempt     int         NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, job_id, step)
);

-- Named events. A signal is kept (signalled_at set), so a job that awaits it
-- later goes on at once: no signal is lost to a race with its waiter. Every
-- await and signal of an event goes through its row, which orders them.
CREATE TABLE wf.event (
    name         text PRIMARY KEY,
    payload      jsonb,
    signalled_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Jobs parked in `waiting` by wf_await_event. A row is acted on only while
-- its job is still waiting at that attempt; rows left behind by a cancel are
-- removed by the signal, the timeout or the reaper.
CREATE TABLE wf.event_wait (
    queue      text        NOT NULL,
    id         bigint      NOT NULL,
    attempt    int         NOT NULL,
    event      text        NOT NULL,
    timeout_at timestamptz,
    since      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, id)
);
CREATE INDEX event_wait_event ON wf.event_wait (event);
CREATE INDEX event_wait_timeout ON wf.event_wait (timeout_at) WHERE timeout_at IS NOT NULL;

-- Cron schedules, fired by the background worker (times in UTC).
CREATE TABLE wf.schedule (
    name        text        PRIMARY KEY,
    cron        text        NOT NULL,
    queue       text        NOT NULL,
    payload     jsonb       NOT NULL,
    next_run_at timestamptz,          -- NULL: the expression never fires again
    last_run_at timestamptz,          -- the last tick enqueued
    last_job_id bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedule_due ON wf.schedule (next_run_at);

-- Releases left to the background worker. A completion that finds a child
-- locked -- by the completion of another of its parents, which holds it
-- until its commit is durable -- records its release here instead of
-- waiting, and the worker applies it moments later. Fan-in steps then cost
-- their completers no lock wait.
CREATE TABLE wf.release_debt (
    child_queue text   NOT NULL,
    child_id    bigint NOT NULL,
    parent_id   bigint NOT NULL,
    PRIMARY KEY (child_queue, child_id, parent_id)
);

SELECT pg_catalog.pg_extension_config_dump('wf.release_debt', '');
SELECT pg_catalog.pg_extension_config_dump('wf.workflow', '');
SELECT pg_catalog.pg_extension_config_dump('wf.checkpoint', '');
SELECT pg_catalog.pg_extension_config_dump('wf.event', '');
SELECT pg_catalog.pg_extension_config_dump('wf.event_wait', '');
SELECT pg_catalog.pg_extension_config_dump('wf.schedule', '');

-- wf.jobs gains the event a waiting job waits for.
CREATE OR REPLACE VIEW wf.jobs AS
SELECT j.id, j.queue, j.status, j.payload, j.result, j.attempt, j.max_attempts,
       j.priority, j.run_at, j.idempotency_key, j.workflow_id, j.step_name,
       j.depends_on, j.last_error, j.worker,
       CASE WHEN j.status = 'running' THEN c.lease_expires_at END AS lease_expires_at,
       j.created_at, j.started_at, j.finished_at,
       CASE WHEN j.status = 'running' THEN j.owner_pid END AS owner_pid, j.cancel_requested,
       w.event AS waiting_for, j.events
  FROM wf.job j
  LEFT JOIN wf.claim c ON c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt
  LEFT JOIN wf.event_wait w ON j.status = 'waiting' AND w.queue = j.queue AND w.id = j.id
                           AND w.attempt = j.attempt;

-- One row per workflow: steps of one workflow_id, from wf_submit or from
-- wf_enqueue(workflow_id => ...).
CREATE VIEW wf.workflows AS
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
          FROM wf.job WHERE workflow_id IS NOT NULL
         GROUP BY workflow_id) AS s
  LEFT JOIN wf.workflow w ON w.id = s.workflow_id;

CREATE VIEW wf.schedules AS
SELECT name, cron, queue, payload, next_run_at AS next_run, last_run_at AS last_run,
       last_job_id, created_at, updated_at
  FROM wf.schedule;

-- No JIT for any statement of these functions. With enable_seqscan off, a
-- plan that still has a sequential scan (a tiny table without a useful
-- index) costs over 1e10, far above jit_above_cost, and would be compiled
-- on every call: hundreds of milliseconds for a millisecond's work.
ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[]) SET jit = off;
ALTER FUNCTION wf_enqueue_batch(text, jsonb) SET jit = off;
ALTER FUNCTION wf_heartbeat(text, bigint, int, interval) SET jit = off;
ALTER FUNCTION wf_complete(text, bigint, int, jsonb) SET jit = off;
ALTER FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) SET jit = off;
ALTER FUNCTION wf_fail(text, bigint, int, text, interval, boolean) SET jit = off;
ALTER FUNCTION wf_retry(text, bigint) SET jit = off;
ALTER FUNCTION wf_cancel(text, bigint) SET jit = off;
ALTER FUNCTION wf_sweep() SET jit = off;

-- wf_claim and wf_complete_and_claim return two more columns: the step
-- checkpoints the job already has, and the events delivered to it. Both are
-- NULL on a job's first claim.
DROP FUNCTION wf_claim(text, text, int, interval, interval);
CREATE FUNCTION wf_claim(queue text, worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                         lease interval DEFAULT NULL, wait interval DEFAULT NULL)
RETURNS TABLE (id bigint, attempt int, queue text, payload jsonb, workflow_id uuid,
               step_name text, priority int, max_attempts int, idempotency_key text,
               inputs jsonb, lease_expires_at timestamptz, checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off;

DROP FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval);
CREATE FUNCTION wf_complete_and_claim(queue text, id bigint, attempt int, result jsonb DEFAULT NULL,
                                      worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                                      lease interval DEFAULT NULL)
RETURNS TABLE (completed boolean, id bigint, attempt int, queue text, payload jsonb,
               workflow_id uuid, step_name text, priority int, max_attempts int,
               idempotency_key text, inputs jsonb, lease_expires_at timestamptz,
               checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_complete_and_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off SET jit = off;

-- A whole workflow in one call and one statement; returns its workflow_id.
CREATE FUNCTION wf_submit(spec jsonb)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_submit' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Every step of a workflow: status, attempts, timings, error, result.
CREATE FUNCTION wf_workflow(workflow_id uuid)
RETURNS jsonb AS 'MODULE_PATHNAME', 'wf_workflow' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Cancels the steps that have not finished; returns how many it cancelled
-- or flagged (a running step learns it from its next heartbeat).
CREATE FUNCTION wf_cancel_workflow(workflow_id uuid)
RETURNS int AS 'MODULE_PATHNAME', 'wf_cancel_workflow' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- 'recorded', 'already_recorded' (the first output is kept), or NULL for a
-- stale (queue, id, attempt).
CREATE FUNCTION wf_checkpoint(queue text, id bigint, attempt int, step text, output jsonb DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_checkpoint' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Back to pending until now() + delay, without spending an attempt.
-- Returns the new status ('pending', or 'cancelled' when a cancel was
-- requested), or NULL for a stale token.
CREATE FUNCTION wf_snooze(queue text, id bigint, attempt int, delay interval)
RETURNS text AS 'MODULE_PATHNAME', 'wf_snooze' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Parks a running job until `event` is signalled or `timeout` passes.
-- Returns 'waiting', 'pending' (already signalled: ready again at once),
-- 'cancelled', or NULL for a stale token.
CREATE FUNCTION wf_await_event(queue text, id bigint, attempt int, event text,
                               timeout interval DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_await_event' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Signals an event (kept for later awaits); returns the jobs made ready.
CREATE FUNCTION wf_signal(event text, payload jsonb DEFAULT NULL)
RETURNS int AS 'MODULE_PATHNAME', 'wf_signal' LANGUAGE C VOLATILE
SET enable_seqscan = off SET jit = off;

-- Creates or replaces a cron schedule; returns its next run.
CREATE FUNCTION wf_schedule(name text, cron text, queue text, payload jsonb DEFAULT '{}')
RETURNS timestamptz AS 'MODULE_PATHNAME', 'wf_schedule' LANGUAGE C VOLATILE
SET jit = off;

CREATE FUNCTION wf_unschedule(name text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_unschedule' LANGUAGE C VOLATILE
SET jit = off;
