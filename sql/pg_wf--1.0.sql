-- pg_wf 1.0: schema only. Every wf_* function is LANGUAGE C (src/pg/*.cpp);
-- nothing here does the work.
\echo Use "CREATE EXTENSION pg_wf" to load this file. \quit

CREATE SCHEMA wf;

-- Per-queue settings. A queue without a row uses the defaults below.
CREATE TABLE wf.queue_config (
    queue        text PRIMARY KEY,
    max_attempts int      NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    backoff_base interval NOT NULL DEFAULT '1 second'
                 CHECK (backoff_base > interval '0'),
    backoff_max  interval NOT NULL DEFAULT '1 hour',
    lease        interval          CHECK (lease > interval '0'),
    max_running  int               CHECK (max_running > 0),
    paused       boolean  NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE SEQUENCE wf.job_id_seq;

-- One row per job, kept until wf.retention after it finished. No index
-- depends on a column that a claim or a completion changes, so both are HOT
-- updates that write no index entry; the free space left on each page
-- (fillfactor) is where those updates go. Columns that change sit together
-- in the middle, so WAL records of updates shrink to the changed bytes.
-- The primary key and every index lead with queue, so the table can later
-- be partitioned or distributed by queue.
CREATE TABLE wf.job (
    queue            text        NOT NULL,
    id               bigint      NOT NULL DEFAULT nextval('wf.job_id_seq'),
    priority         int         NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    workflow_id      uuid,
    max_attempts     int         NOT NULL CHECK (max_attempts > 0),
    attempt_budget   int         NOT NULL,    -- attempts granted by enqueue and by each wf_retry
    -- changed by claims and completions:
    status           text        NOT NULL CHECK (status IN
                       ('blocked','pending','running','waiting','done','failed','cancelled')),
    attempt          int         NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    owner_pid        int,         -- for people reading wf.jobs; the owner lock is the truth
    pending_deps     int         NOT NULL DEFAULT 0,  -- unfinished dependencies
    has_dependents   boolean     NOT NULL DEFAULT false,  -- some job depends on this one
    cancel_requested boolean     NOT NULL DEFAULT false,
    cancelled_by     bigint,      -- the failed upstream job that cancelled this one
    worker           text,
    last_error       text,
    result           jsonb,
    -- set once:
    step_name        text,
    idempotency_key  text,
    depends_on       bigint[],
    payload          jsonb       NOT NULL,
    PRIMARY KEY (queue, id)
) WITH (fillfactor = 50);
ALTER SEQUENCE wf.job_id_seq OWNED BY wf.job.id;

-- Dependencies name jobs by id only.
CREATE INDEX job_id ON wf.job (id);
CREATE UNIQUE INDEX job_idempotency ON wf.job (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The ready set: one row per pending job, in claim order. A claim deletes
-- rows here; nothing else scans it, so its index holds only ready jobs and
-- history never slows a claim down.
CREATE TABLE wf.ready (
    queue    text        NOT NULL,
    priority int         NOT NULL,
    run_at   timestamptz NOT NULL,
    id       bigint      NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);
CREATE UNIQUE INDEX ready_claim_order ON wf.ready (queue, priority DESC, run_at, id);

-- Who holds each running job. UNLOGGED: a claim is worth nothing after a
-- crash (its session is gone), so writing it to WAL would only cost. After a
-- crash this table is empty and the reaper finds running jobs in wf.job once
-- (see reaper.cpp: the sentinel row says whether that is needed).
CREATE UNLOGGED TABLE wf.claim (
    queue            text   NOT NULL,
    id               bigint NOT NULL,
    attempt          int    NOT NULL,
    owner_session    bigint NOT NULL,   -- key of the claiming session's lock
    lease            interval,
    lease_expires_at timestamptz,
    PRIMARY KEY (queue, id)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);
INSERT INTO wf.claim VALUES ('', 0, 0, 0);  -- the sentinel: present until a crash

-- Reverse edges of depends_on: completing a parent touches only its children.
CREATE TABLE wf.dependency (
    parent_id   bigint NOT NULL,
    child_queue text   NOT NULL,
    child_id    bigint NOT NULL,
    PRIMARY KEY (parent_id, child_queue, child_id)
);

-- pg_dump keeps the jobs, settings and edges (wf.claim is not dumped: a
-- restore has no live sessions, and the reaper recovers running jobs).
SELECT pg_catalog.pg_extension_config_dump('wf.job', '');
SELECT pg_catalog.pg_extension_config_dump('wf.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.ready', '');
SELECT pg_catalog.pg_extension_config_dump('wf.dependency', '');
SELECT pg_catalog.pg_extension_config_dump('wf.queue_config', '');

CREATE VIEW wf.jobs AS
SELECT j.id, j.queue, j.status, j.payload, j.result, j.attempt, j.max_attempts,
       j.priority, j.run_at, j.idempotency_key, j.workflow_id, j.step_name,
       j.depends_on, j.last_error, j.worker,
       CASE WHEN j.status = 'running' THEN c.lease_expires_at END AS lease_expires_at,
       j.created_at, j.started_at, j.finished_at, j.owner_pid, j.cancel_requested
  FROM wf.job j
  LEFT JOIN wf.claim c ON c.queue = j.queue AND c.id = j.id AND c.attempt = j.attempt;

CREATE VIEW wf.queue_stats AS
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
  FROM (SELECT queue, status, run_at FROM wf.job
        UNION ALL
        SELECT queue, NULL, NULL FROM wf.queue_config) AS q
 GROUP BY queue;

-- The SQL API. Not STRICT: a NULL where a value is required is reported as
-- an error, never turned into a silent NULL result.
-- SET enable_seqscan = off: the tables behind a claim churn (wf.ready,
-- wf.claim), and a small table with many dead pages makes the planner
-- prefer a sequential scan over its index by far; every statement of these
-- functions is meant to go through an index.
CREATE FUNCTION wf_enqueue(queue text, payload jsonb DEFAULT '{}',
                           run_at timestamptz DEFAULT NULL, priority int DEFAULT 0,
                           max_attempts int DEFAULT NULL, idempotency_key text DEFAULT NULL,
                           workflow_id uuid DEFAULT NULL, step_name text DEFAULT NULL,
                           depends_on bigint[] DEFAULT NULL)
RETURNS bigint AS 'MODULE_PATHNAME', 'wf_enqueue' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_enqueue_batch(queue text, payloads jsonb)
RETURNS SETOF bigint AS 'MODULE_PATHNAME', 'wf_enqueue_batch' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_claim(queue text, worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                         lease interval DEFAULT NULL, wait interval DEFAULT NULL)
RETURNS TABLE (id bigint, attempt int, queue text, payload jsonb, workflow_id uuid,
               step_name text, priority int, max_attempts int, idempotency_key text,
               inputs jsonb, lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'wf_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off;

-- One round trip and one commit per job: complete this one, claim the next.
CREATE FUNCTION wf_complete_and_claim(queue text, id bigint, attempt int, result jsonb DEFAULT NULL,
                                      worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                                      lease interval DEFAULT NULL)
RETURNS TABLE (completed boolean, id bigint, attempt int, queue text, payload jsonb,
               workflow_id uuid, step_name text, priority int, max_attempts int,
               idempotency_key text, inputs jsonb, lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'wf_complete_and_claim' LANGUAGE C VOLATILE ROWS 1
SET enable_seqscan = off;

CREATE FUNCTION wf_heartbeat(queue text, id bigint, attempt int, extend interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_heartbeat' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_complete(queue text, id bigint, attempt int, result jsonb DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_complete' LANGUAGE C VOLATILE
SET enable_seqscan = off;

-- Many completions of one queue in one statement; returns the ids completed.
CREATE FUNCTION wf_complete_many(queue text, ids bigint[], attempts int[], results jsonb[] DEFAULT NULL)
RETURNS SETOF bigint AS 'MODULE_PATHNAME', 'wf_complete_many' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_fail(queue text, id bigint, attempt int, error text,
                        retry_in interval DEFAULT NULL, permanent boolean DEFAULT false)
RETURNS text AS 'MODULE_PATHNAME', 'wf_fail' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_retry(queue text, id bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_retry' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_cancel(queue text, id bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_cancel' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_sweep()
RETURNS int AS 'MODULE_PATHNAME', 'wf_sweep' LANGUAGE C VOLATILE
SET enable_seqscan = off;

CREATE FUNCTION wf_configure_queue(queue text, max_attempts int DEFAULT NULL,
                                   backoff_base interval DEFAULT NULL,
                                   backoff_max interval DEFAULT NULL,
                                   lease interval DEFAULT NULL, max_running int DEFAULT NULL,
                                   paused boolean DEFAULT NULL)
RETURNS void AS 'MODULE_PATHNAME', 'wf_configure_queue' LANGUAGE C VOLATILE;

-- Reports whether the background worker can serve this database (NOTICE if
-- not) and wakes the launcher so it does so at once.
CREATE FUNCTION wf._after_create() RETURNS void
AS 'MODULE_PATHNAME', 'wf_after_create' LANGUAGE C VOLATILE;
SELECT wf._after_create();
