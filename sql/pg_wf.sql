-- pg_wf: the current schema, in one file. The build copies it to
-- pg_wf--<default_version>.sql, which CREATE EXTENSION pg_wf runs (Makefile,
-- DATA_built). Beside it, pg_wf--1.0.sql and the upgrade scripts
-- pg_wf--X--Y.sql take an existing database, or CREATE EXTENSION ... VERSION
-- of an older version, to this same schema; test/t/015_schema_drift.pl checks
-- that the two paths end equal, object by object. A change of schema is made
-- in both: here, and in a new upgrade script.
--
-- Schema only. Every wf_* function is LANGUAGE C (src/pg/*.cpp); nothing here
-- does the work. Tables and views live in schema wf; functions in the schema
-- given to CREATE EXTENSION.
\echo Use "CREATE EXTENSION pg_wf" to load this file. \quit

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

CREATE SCHEMA wf;

------------------------------------------------------------------------------
-- Queues and jobs
------------------------------------------------------------------------------

-- Per-queue settings (wf_configure_queue). A queue without a row uses the
-- defaults below.
CREATE TABLE wf.queue_config (
    queue        text PRIMARY KEY,
    max_attempts int      NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    backoff_base interval NOT NULL DEFAULT '1 second'
                 CHECK (backoff_base > interval '0'),
    backoff_max  interval NOT NULL DEFAULT '1 hour',
    lease        interval          CHECK (lease > interval '0'),
    max_running  int               CHECK (max_running > 0),
    paused       boolean  NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- Flow control (1.5; src/pg/jobs/flow_control.hpp). NULL or false: off.
    rate_limit      int      CHECK (rate_limit > 0),       -- claims per rate_period
    rate_period     interval CHECK (rate_period > interval '0'),
    key_rate_limit  int      CHECK (key_rate_limit > 0),   -- claims per rate_period per key
    key_concurrency int      CHECK (key_concurrency > 0),  -- running jobs per key
    fair            boolean  NOT NULL DEFAULT false,       -- claims rotate over keys
    ordered         boolean  NOT NULL DEFAULT false,       -- one job per key, in enqueue order
    max_run_time    interval CHECK (max_run_time > interval '0'),
    -- Workflows 2 (1.6): the version of the queue's jobs that name none.
    version         text COLLATE "C",
    -- 1.10: the queue began to claim key by key, and ready rows a
    -- transaction that overlapped that change wrote outside the key order
    -- may still be there: the worker puts them in once every such
    -- transaction has ended (worker.cpp, sweep_key_order).
    key_order_sweep boolean NOT NULL DEFAULT false
);

CREATE SEQUENCE wf.job_id_seq;

-- One row per job, kept until wf.retention after it finished.
--
-- No index depends on a column that a completion changes, so completions
-- are HOT updates that write no index entry; the free space left on each
-- page (fillfactor) is where those updates go. Columns that change sit
-- together in the middle, so WAL records of updates shrink to the changed
-- bytes. The primary key leads with queue, so the table can be partitioned
-- or distributed by queue; job_id and job_workflow serve the lookups that
-- cross queues (dependencies, workflows).
--
-- A claim writes no job row: a running attempt lives in its claim row
-- (wf.claim), and the job row keeps the last attempt that ended and says
-- `pending` while the job runs. Completion, failure and recovery write the
-- attempt, worker and start time back into the job row.
--
-- No CHECK constraints on this hot table: PostgreSQL parses and prepares a
-- table's CHECK expressions again for every statement that writes it, which
-- cost about 5% of each enqueue, claim and completion. Every write of wf.job
-- goes through pg_wf's functions, which only write valid statuses and a
-- positive max_attempts (wf_enqueue and wf_submit check it).
CREATE TABLE wf.job (
    queue            text        NOT NULL,
    id               bigint      NOT NULL DEFAULT nextval('wf.job_id_seq'),
    priority         int         NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    workflow_id      uuid,
    max_attempts     int         NOT NULL,    -- > 0
    attempt_budget   int         NOT NULL,    -- attempts granted by enqueue and by each wf_retry
    -- changed by completions (and parking, recovery, cancels):
    status           text        NOT NULL,    -- blocked, pending (also while it runs), waiting,
                                              -- done, failed, cancelled
    attempt          int         NOT NULL DEFAULT 0,  -- the last attempt that ended
    run_at           timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
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
    -- Events delivered to a parked job ({"<event>": {"status": ..., "payload": ...}}),
    -- handed back by its next claims. Last because 1.1 added it: a fresh
    -- install has the columns in the order of an updated one.
    events           jsonb,
    -- Flow control (1.5), set once: the job's key (a tenant, a customer),
    -- its dedup key, its longest run and the time it must start by. Keys
    -- compare as bytes (COLLATE "C") wherever they are stored: claims walk
    -- them in index order, which needs no language's order, and a byte
    -- comparison costs a fraction of a locale's.
    key              text COLLATE "C",
    dedup_key        text,
    max_run_time     interval,
    start_by         timestamptz,
    -- Workflows 2 (1.6), set once: the version of the code that runs it
    -- (claims may ask for versions), and for a step of a child workflow the
    -- job that started it. progress: the last wf_progress of an attempt
    -- that ended (a running one's is in its claim row).
    version          text COLLATE "C",
    child_of         bigint,
    progress         jsonb,
    -- Led by the id (1.11): ids come from one sequence, so a lookup or an
    -- insert compares bigints and reaches the queue's text only at its own
    -- row, and dependencies, which name jobs by id only, need no second
    -- index. The queue completes the key for Citus, which distributes by it.
    PRIMARY KEY (id, queue)
) WITH (fillfactor = 50);
ALTER SEQUENCE wf.job_id_seq OWNED BY wf.job.id;

CREATE UNIQUE INDEX job_idempotency ON wf.job (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- workflow_id never changes after insert, so this index keeps completions HOT.
CREATE INDEX job_workflow ON wf.job (workflow_id) WHERE workflow_id IS NOT NULL;
-- The jobs of a key in enqueue order: where an ordered group finds its head.
-- Keys never change, so this index keeps completions HOT too.
CREATE INDEX job_key ON wf.job (queue, key, id) WHERE key IS NOT NULL;
-- Jobs with a start-by deadline, for the background worker to fail those
-- that did not start in time.
CREATE INDEX job_start_by ON wf.job (start_by) WHERE start_by IS NOT NULL;

-- The ready set: one row per pending job that is not running, in claim
-- order, keyed by its job's own priority and run_at. A claim deletes rows
-- here; nothing else scans it, so its index holds only ready jobs and
-- history never slows a claim down. Removing the ready row is a claim's one
-- write to WAL -- which is also what makes a claim survive a crash: a
-- pending job with neither a ready row nor a claim lost its claim in a crash
-- (or a failover), and recovery counts that attempt (see reaper.cpp).
CREATE TABLE wf.ready (
    queue    text        NOT NULL,
    priority int         NOT NULL,
    run_at   timestamptz NOT NULL,
    id       bigint      NOT NULL,
    key      text COLLATE "C",  -- the job's key (1.5)
    version  text COLLATE "C",  -- the job's version (1.6)
    -- In ready_key_order (1.10): false only for rows enqueued into a queue
    -- whose claims do not go key by key.
    key_order boolean NOT NULL DEFAULT true
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);
CREATE UNIQUE INDEX ready_claim_order ON wf.ready (queue, priority DESC, run_at, id);
-- Logical replication (a publication, Citus moving a shard) names a
-- deleted ready row by its claim order (1.7).
ALTER TABLE wf.ready REPLICA IDENTITY USING INDEX ready_claim_order;
-- The same rows key by key, for claims that go key by key (fair, ordered,
-- per-key limits): skipping from one key to the next is one index descent.
-- Only the rows of such queues (1.10): an enqueue into any other queue
-- writes one index entry less. A row written without saying is in it.
CREATE INDEX ready_key_order ON wf.ready (queue, key, priority DESC, run_at, id)
    WHERE key_order;
-- The rows of versioned jobs version by version, for claims that name the
-- versions they run: each version's rows are one index range.
CREATE INDEX ready_version_order ON wf.ready (queue, version, priority DESC, run_at, id)
    WHERE version IS NOT NULL;

-- The running attempts: who runs each one (the key of the claiming session's
-- lock, and for people reading wf.jobs its pid and worker name), since when,
-- its attempt number and lease. UNLOGGED: a claim is worth nothing after a
-- crash (its session is gone), so writing it to WAL would only cost. After a
-- crash this table is empty and the reaper finds the lost claims in wf.job
-- once (see reaper.cpp: the sentinel row says whether that is needed).
CREATE UNLOGGED TABLE wf.claim (
    queue            text   NOT NULL,
    id               bigint NOT NULL,
    attempt          int    NOT NULL,
    owner_session    bigint NOT NULL,   -- key of the claiming session's lock
    lease            interval,
    lease_expires_at timestamptz,
    worker           text,
    owner_pid        int,
    started_at       timestamptz,
    key              text COLLATE "C",  -- the job's key (1.5), for per-key limits
    run_deadline     timestamptz,   -- the end of its max_run_time (1.5)
    -- The attempt's last wf_progress (1.6): unlogged, so a report costs no WAL.
    progress         jsonb,
    PRIMARY KEY (id, queue)  -- led by the id, as wf.job's (1.11)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0);
CREATE INDEX claim_key ON wf.claim (queue, key) WHERE key IS NOT NULL;
INSERT INTO wf.claim VALUES ('', 0, 0, 0);  -- the sentinel: present until a crash

-- On a distributed pg_wf (1.7), the sentinel of each shard group placed on
-- this node: a table of the node's own, never distributed (see
-- recover_group_orphans in job_state.cpp).
CREATE UNLOGGED TABLE wf.group_sentinel (
    job_shard bigint PRIMARY KEY  -- the group's shard of wf.job
);

-- Reverse edges of depends_on: completing a parent touches only its children.
CREATE TABLE wf.dependency (
    parent_id   bigint NOT NULL,
    child_queue text   NOT NULL,
    child_id    bigint NOT NULL,
    PRIMARY KEY (parent_id, child_queue, child_id)
);

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

-- Dedup windows (wf_enqueue's dedup_key): the job that holds a dedup key
-- while it is active. A row whose job has finished holds nothing: the next
-- enqueue with that key takes it over, retention removes it.
CREATE TABLE wf.dedup (
    queue     text   NOT NULL,
    dedup_key text   NOT NULL,
    job_id    bigint NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

-- Ordered groups (wf_configure_queue's ordered): the last job claimed of
-- each key. The group's head is its first job from there on that has not
-- ended done or cancelled; only the head may run.
CREATE TABLE wf.ordered_group (
    queue   text   NOT NULL,
    key     text   COLLATE "C" NOT NULL,
    head_id bigint NOT NULL,
    PRIMARY KEY (queue, key)
);

------------------------------------------------------------------------------
-- Workflows, checkpoints, events, schedules
------------------------------------------------------------------------------

-- One row per wf_submit call: what the steps of one workflow_id have in common.
CREATE TABLE wf.workflow (
    id           uuid        PRIMARY KEY,
    name         text,
    steps        int         NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    -- 1.6: the caller's key (wf_signal_with_start, wf_submit's "key") and,
    -- for a child workflow, the job that started it.
    key          text,
    child_of     bigint
);

-- Workflow keys: the workflow that holds each key while it is active (as
-- wf.dedup for jobs). A row whose workflow has finished holds nothing: the
-- next start with that key takes it over.
CREATE TABLE wf.workflow_key (
    key         text PRIMARY KEY,
    workflow_id uuid NOT NULL
);

-- Child workflows (wf_start_child): one row per child, named by its parent
-- job. status is NULL while the child runs; when its last step ends it
-- becomes the child's outcome (done, failed, cancelled) and `outcome` says
-- what the parent's next claim reads (in its events, as "wf:child:<name>").
-- delivered: the outcome is in the parent's row.
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
-- Children not yet delivered, for the background worker's pass.
CREATE INDEX child_unsettled ON wf.child (workflow_id) WHERE NOT delivered;

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
    updated_at  timestamptz NOT NULL DEFAULT now(),
    owner       regrole     NOT NULL, -- who scheduled it: it fires with that role's rights
    enabled     boolean     NOT NULL DEFAULT true  -- 1.6: wf_enable_schedule
);
CREATE INDEX schedule_due ON wf.schedule (next_run_at);

-- Who may do what, per queue (wf_grant; src/pg/api/rights.hpp). `queues` is
-- a queue name, or a pattern whose trailing * matches any rest ('*': every
-- queue). For capability signal it names events.
CREATE TABLE wf.grant (
    grantee    regrole     NOT NULL,
    capability text        NOT NULL
               CHECK (capability IN ('produce', 'work', 'signal', 'operate', 'observe',
                                     'administer')),
    queues     text        NOT NULL CHECK (queues <> ''),
    granted_by regrole     NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    -- The grantee's name (1.7): Citus copies a reference table's OIDs as
    -- they are, and a role's OID differs from node to node; its name does
    -- not. A distributed pg_wf checks rights by name.
    grantee_name text      NOT NULL,
    PRIMARY KEY (grantee, capability, queues)
);

-- pg_dump keeps the jobs, settings, edges and workflow state. wf.claim is
-- not dumped: a restore has no live sessions, and a job that ran while the
-- dump was taken is restored pending without a ready row, for
-- wf_recover_lost_claims() to give back.
SELECT pg_catalog.pg_extension_config_dump('wf.job', '');
SELECT pg_catalog.pg_extension_config_dump('wf.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.ready', '');
SELECT pg_catalog.pg_extension_config_dump('wf.dependency', '');
SELECT pg_catalog.pg_extension_config_dump('wf.queue_config', '');
SELECT pg_catalog.pg_extension_config_dump('wf.release_debt', '');
SELECT pg_catalog.pg_extension_config_dump('wf.workflow', '');
SELECT pg_catalog.pg_extension_config_dump('wf.checkpoint', '');
SELECT pg_catalog.pg_extension_config_dump('wf.event', '');
SELECT pg_catalog.pg_extension_config_dump('wf.event_wait', '');
SELECT pg_catalog.pg_extension_config_dump('wf.schedule', '');
SELECT pg_catalog.pg_extension_config_dump('wf.grant', '');
SELECT pg_catalog.pg_extension_config_dump('wf.dedup', '');
SELECT pg_catalog.pg_extension_config_dump('wf.ordered_group', '');
SELECT pg_catalog.pg_extension_config_dump('wf.workflow_key', '');
SELECT pg_catalog.pg_extension_config_dump('wf.child', '');

------------------------------------------------------------------------------
-- Views: what users read
------------------------------------------------------------------------------

-- The views show a role the queues it holds any right on (every queue for
-- a superuser). They are security barriers: a function in the caller's
-- query sees no row of another queue.
CREATE FUNCTION wf._visible(queue text) RETURNS boolean
AS 'MODULE_PATHNAME', 'wf_visible' LANGUAGE C STABLE;
CREATE FUNCTION wf._administers(queues text) RETURNS boolean
AS 'MODULE_PATHNAME', 'wf_administers' LANGUAGE C STABLE;

-- One row per job. Status, attempt, worker, start and owner of a running job
-- come from its claim (the job row says pending, one attempt behind).
CREATE VIEW wf.jobs WITH (security_barrier) AS
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

-- The status the counting views show, from logged tables only, so that
-- they work on a hot standby too (wf.jobs does not: unlogged tables cannot
-- be read there): a pending job without its ready row is running (or its
-- claim was lost and awaits recovery).
CREATE VIEW wf.job_states WITH (security_barrier) AS
SELECT j.queue, j.id, j.workflow_id, j.run_at, j.created_at, j.finished_at,
       CASE WHEN j.status = 'pending' AND NOT EXISTS (
                 SELECT 1 FROM wf.ready r WHERE r.queue = j.queue AND r.priority = j.priority
                    AND r.run_at = j.run_at AND r.id = j.id)
            THEN 'running' ELSE j.status END AS status
  FROM wf.job j
 WHERE wf._visible(j.queue);

-- What a rate limit leaves of its window now: claims that the queue (key
-- NULL) or one of its keys may still make (src/pg/runtime/rate_windows.hpp).
-- NULL without pg_wf in shared_preload_libraries.
CREATE FUNCTION wf._rate_left(queue text, key text, rate_limit int, rate_period interval)
RETURNS int AS 'MODULE_PATHNAME', 'wf_rate_left' LANGUAGE C STABLE;

-- One row per queue: a configured queue without jobs shows zeros.
-- rate_left: claims its rate limit still allows in the current window.
-- Then the queue's settings (1.6; wf_configure_queue's, defaults where it
-- has none), for readers who may not read wf.queue_config.
CREATE VIEW wf.queue_stats WITH (security_barrier) AS
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

-- One row per key of the queues that claim key by key (fair, ordered, or
-- with per-key limits), for keys with ready or running jobs: what holds
-- each one back (`throttled`, NULL when nothing does). `head` is an ordered
-- group's head (the one job of the key that may run) and `head_status` its
-- status: a failed head blocks its group until wf_retry or wf_cancel.
CREATE VIEW wf.key_stats WITH (security_barrier) AS
SELECT k.queue, k.key, k.ready, k.running, c.key_concurrency,
       CASE WHEN c.key_rate_limit IS NOT NULL
            THEN wf._rate_left(k.queue, k.key, c.key_rate_limit,
                               coalesce(c.rate_period, interval '1 second')) END AS rate_left,
       h.id AS head, h.status AS head_status,
       CASE WHEN c.ordered AND h.status = 'failed' THEN 'ordered: head failed'
            WHEN c.ordered AND h.status = 'waiting' THEN 'ordered: head waiting'
            WHEN c.ordered AND h.status = 'blocked' THEN 'ordered: head blocked'
            WHEN c.ordered AND k.running > 0 THEN 'ordered: head running'
            WHEN c.ordered AND h.run_at > now() THEN 'ordered: head not due'
            WHEN k.running >= c.key_concurrency THEN 'key_concurrency'
            WHEN c.key_rate_limit IS NOT NULL
                 AND wf._rate_left(k.queue, k.key, c.key_rate_limit,
                                   coalesce(c.rate_period, interval '1 second')) = 0
              THEN 'key_rate_limit'
       END AS throttled
  FROM (SELECT queue, key, count(*) FILTER (WHERE ready) AS ready,
               count(*) FILTER (WHERE NOT ready) AS running
          FROM (SELECT r.queue, r.key, true AS ready FROM wf.ready r
                 WHERE r.key IS NOT NULL AND r.run_at <= now()
                UNION ALL
                SELECT c.queue, c.key, false FROM wf.claim c
                 WHERE c.key IS NOT NULL AND c.queue <> '') AS u
         WHERE wf._visible(queue)
         GROUP BY queue, key) AS k
  JOIN wf.queue_config c ON c.queue = k.queue
       AND (c.fair OR c.ordered OR c.key_concurrency IS NOT NULL OR c.key_rate_limit IS NOT NULL)
  LEFT JOIN LATERAL (
       SELECT j.id, CASE WHEN j.status = 'pending' AND k.running > 0 THEN 'running'
                         ELSE j.status END AS status, j.run_at
         FROM wf.job j
        WHERE c.ordered AND j.queue = k.queue AND j.key = k.key
          AND j.id >= coalesce((SELECT g.head_id FROM wf.ordered_group g
                                 WHERE g.queue = k.queue AND g.key = k.key), 0)
          AND j.status NOT IN ('done', 'cancelled')
        ORDER BY j.id LIMIT 1) AS h ON true;

-- One row per workflow: steps of one workflow_id, from wf_submit or from
-- wf_enqueue(workflow_id => ...).
CREATE VIEW wf.workflows WITH (security_barrier) AS
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
-- A version whose workers retired and that still has jobs here needs them
-- back until it drains.
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

-- Counters per queue since the server started (pg_wf's shared memory, like
-- pg_stat_*; src/pg/runtime/metrics.hpp), of this database, for the queues
-- the reader may see. NULL-free: a queue appears once something happened in
-- it. claim_wait_seconds: the time claims with `wait` spent waiting.
CREATE FUNCTION wf._metrics()
RETURNS TABLE (queue text, enqueued bigint, claimed bigint, completed bigint, failed bigint,
               retried bigint, recovered bigint, cancelled bigint, claim_waits bigint,
               claim_wait_seconds double precision)
AS 'MODULE_PATHNAME', 'wf_metrics' LANGUAGE C VOLATILE;
CREATE VIEW wf.metrics WITH (security_barrier) AS
SELECT m.* FROM wf._metrics() m WHERE wf._visible(m.queue);

CREATE VIEW wf.schedules WITH (security_barrier) AS
SELECT name, cron, queue, payload, next_run_at AS next_run, last_run_at AS last_run,
       last_job_id, created_at, updated_at, enabled
  FROM wf.schedule
 WHERE wf._visible(queue);

-- The grants a role may see: its own (and its roles'), and those on queues
-- it administers.
CREATE VIEW wf.grants WITH (security_barrier) AS
SELECT grantee, capability, queues, granted_by, granted_at
  FROM wf.grant
 WHERE pg_catalog.pg_has_role(grantee, 'USAGE') OR wf._administers(queues);

------------------------------------------------------------------------------
-- The SQL API
------------------------------------------------------------------------------

-- Not STRICT: a NULL where a value is required is reported as an error,
-- never turned into a silent NULL result.
--
-- Every statement these functions run is planned and run with
-- search_path = pg_catalog, pg_temp, enable_seqscan = off and jit = off,
-- set by the library when a function runs its first statement and
-- restored when it returns (src/pg/base/statement_settings.hpp says why
-- each): a call that runs no statement pays nothing for them. Until 1.12
-- each function's definition SET them, for every call.

-- Jobs: enqueue, claim, heartbeat, complete, fail, retry, cancel.

CREATE FUNCTION wf_enqueue(queue text, payload jsonb DEFAULT '{}',
                           run_at timestamptz DEFAULT NULL, priority int DEFAULT 0,
                           max_attempts int DEFAULT NULL, idempotency_key text DEFAULT NULL,
                           workflow_id uuid DEFAULT NULL, step_name text DEFAULT NULL,
                           depends_on bigint[] DEFAULT NULL, key text DEFAULT NULL,
                           dedup_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
                           max_run_time interval DEFAULT NULL,
                           start_by timestamptz DEFAULT NULL, version text DEFAULT NULL)
RETURNS bigint AS 'MODULE_PATHNAME', 'wf_enqueue' LANGUAGE C VOLATILE;

-- keys: one per payload (or NULL), in the same order.
CREATE FUNCTION wf_enqueue_batch(queue text, payloads jsonb, keys text[] DEFAULT NULL)
RETURNS SETOF bigint AS 'MODULE_PATHNAME', 'wf_enqueue_batch' LANGUAGE C VOLATILE;

-- checkpoints and events: what the job already has from wf_checkpoint and
-- wf_signal (and its children's outcomes); both NULL on a job's first claim.
-- versions: only jobs of these versions (NULL: any job).
CREATE FUNCTION wf_claim(queue text, worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                         lease interval DEFAULT NULL, wait interval DEFAULT NULL,
                         versions text[] DEFAULT NULL)
RETURNS TABLE (id bigint, attempt int, queue text, payload jsonb, workflow_id uuid,
               step_name text, priority int, max_attempts int, idempotency_key text,
               inputs jsonb, lease_expires_at timestamptz, checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_claim' LANGUAGE C VOLATILE ROWS 1;

-- One round trip and one commit per job: complete this one, claim the next.
CREATE FUNCTION wf_complete_and_claim(queue text, id bigint, attempt int, result jsonb DEFAULT NULL,
                                      worker text DEFAULT NULL, max_jobs int DEFAULT 1,
                                      lease interval DEFAULT NULL, versions text[] DEFAULT NULL)
RETURNS TABLE (completed boolean, id bigint, attempt int, queue text, payload jsonb,
               workflow_id uuid, step_name text, priority int, max_attempts int,
               idempotency_key text, inputs jsonb, lease_expires_at timestamptz,
               checkpoints jsonb, events jsonb)
AS 'MODULE_PATHNAME', 'wf_complete_and_claim' LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION wf_heartbeat(queue text, id bigint, attempt int, extend interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_heartbeat' LANGUAGE C VOLATILE;

CREATE FUNCTION wf_complete(queue text, id bigint, attempt int, result jsonb DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_complete' LANGUAGE C VOLATILE;

-- Many completions of one queue in one statement; returns the ids completed.
CREATE FUNCTION wf_complete_many(queue text, ids bigint[], attempts int[], results jsonb[] DEFAULT NULL)
RETURNS SETOF bigint AS 'MODULE_PATHNAME', 'wf_complete_many' LANGUAGE C VOLATILE;

CREATE FUNCTION wf_fail(queue text, id bigint, attempt int, error text,
                        retry_in interval DEFAULT NULL, permanent boolean DEFAULT false)
RETURNS text AS 'MODULE_PATHNAME', 'wf_fail' LANGUAGE C VOLATILE;

CREATE FUNCTION wf_retry(queue text, id bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_retry' LANGUAGE C VOLATILE;

CREATE FUNCTION wf_cancel(queue text, id bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_cancel' LANGUAGE C VOLATILE;

-- Recovery and settings.

CREATE FUNCTION wf_sweep()
RETURNS int AS 'MODULE_PATHNAME', 'wf_sweep' LANGUAGE C VOLATILE;

-- Claims are not dumped (wf.claim is unlogged and holds sessions): a job
-- that ran while a dump was taken is restored pending without a ready row.
-- Run once after a restore has finished; returns the jobs given back.
CREATE FUNCTION wf_recover_lost_claims()
RETURNS int AS 'MODULE_PATHNAME', 'wf_recover_lost_claims' LANGUAGE C VOLATILE;

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
RETURNS void AS 'MODULE_PATHNAME', 'wf_configure_queue' LANGUAGE C VOLATILE;

-- Workflows.

-- A whole workflow in one call and one statement; returns its workflow_id.
CREATE FUNCTION wf_submit(spec jsonb)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_submit' LANGUAGE C VOLATILE;

-- Every step of a workflow: status, attempts, timings, error, result.
CREATE FUNCTION wf_workflow(workflow_id uuid)
RETURNS jsonb AS 'MODULE_PATHNAME', 'wf_workflow' LANGUAGE C VOLATILE;

-- Cancels the steps that have not finished; returns how many it cancelled
-- or flagged (a running step learns it from its next heartbeat).
CREATE FUNCTION wf_cancel_workflow(workflow_id uuid)
RETURNS int AS 'MODULE_PATHNAME', 'wf_cancel_workflow' LANGUAGE C VOLATILE;

-- Inside a running job: checkpoints, durable sleep, events.

-- 'recorded', 'already_recorded' (the first output is kept), or NULL for a
-- stale (queue, id, attempt).
CREATE FUNCTION wf_checkpoint(queue text, id bigint, attempt int, step text, output jsonb DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_checkpoint' LANGUAGE C VOLATILE;

-- Back to pending until now() + delay, without spending an attempt.
-- Returns the new status ('pending', or 'cancelled' when a cancel was
-- requested), or NULL for a stale token.
CREATE FUNCTION wf_snooze(queue text, id bigint, attempt int, delay interval)
RETURNS text AS 'MODULE_PATHNAME', 'wf_snooze' LANGUAGE C VOLATILE;

-- Parks a running job until `event` is signalled or `timeout` passes.
-- Returns 'waiting', 'pending' (already signalled: ready again at once),
-- 'cancelled', or NULL for a stale token.
CREATE FUNCTION wf_await_event(queue text, id bigint, attempt int, event text,
                               timeout interval DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_await_event' LANGUAGE C VOLATILE;

-- Signals an event (kept for later awaits); returns the jobs made ready.
CREATE FUNCTION wf_signal(event text, payload jsonb DEFAULT NULL)
RETURNS int AS 'MODULE_PATHNAME', 'wf_signal' LANGUAGE C VOLATILE;

-- Workflows 2 (1.6).

-- Inside a running job: starts a child workflow named `name` (per parent
-- job: the same name again returns the same child, whatever the attempt).
-- Its outcome reaches the parent's events as "wf:child:<name>" when its
-- last step ends. NULL for a stale token.
CREATE FUNCTION wf_start_child(queue text, id bigint, attempt int, name text, spec jsonb)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_start_child' LANGUAGE C VOLATILE;

-- Parks a running job until every child it started has finished (or
-- `timeout` passes). 'waiting', 'pending' (none unfinished: ready again at
-- once), 'cancelled', or NULL for a stale token.
CREATE FUNCTION wf_await_children(queue text, id bigint, attempt int,
                                  timeout interval DEFAULT NULL)
RETURNS text AS 'MODULE_PATHNAME', 'wf_await_children' LANGUAGE C VOLATILE;

-- Completes a workflow step and adds steps to its workflow in the same
-- transaction (fan-out): `steps` is an array of wf_submit's steps, whose
-- "after" may also name steps of the workflow that are done (this one
-- among them). False for a stale token.
CREATE FUNCTION wf_complete_with_steps(queue text, id bigint, attempt int, result jsonb,
                                       steps jsonb)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_complete_with_steps' LANGUAGE C VOLATILE;

-- The progress of a running attempt (a small jsonb), shown by wf.jobs and
-- wf_workflow. Kept in the unlogged claim row: no WAL per report. False
-- for a stale token.
CREATE FUNCTION wf_progress(queue text, id bigint, attempt int, progress jsonb)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_progress' LANGUAGE C VOLATILE;

-- Blocks until the job has finished (done, failed, cancelled) or `timeout`
-- passes, and returns its status, result and last error; after a timeout,
-- the status it has then. Woken by the commit that finishes it.
CREATE FUNCTION wf_wait_job(queue text, id bigint, timeout interval DEFAULT '30 seconds')
RETURNS TABLE (status text, result jsonb, error text)
AS 'MODULE_PATHNAME', 'wf_wait_job' LANGUAGE C VOLATILE ROWS 1;

-- The same for a workflow: result holds the results of its final steps
-- (those no other step runs after), keyed by step name.
CREATE FUNCTION wf_wait_workflow(workflow_id uuid, timeout interval DEFAULT '30 seconds')
RETURNS TABLE (status text, result jsonb, error text)
AS 'MODULE_PATHNAME', 'wf_wait_workflow' LANGUAGE C VOLATILE ROWS 1;

-- Signals `event` and, in the same transaction, makes sure a workflow with
-- the spec's "key" is active: it submits the spec unless an active
-- workflow holds the key. Returns that workflow's id.
CREATE FUNCTION wf_signal_with_start(spec jsonb, event text, payload jsonb DEFAULT NULL)
RETURNS uuid AS 'MODULE_PATHNAME', 'wf_signal_with_start' LANGUAGE C VOLATILE;

-- Operator actions on many jobs at once (1.6): the failed or cancelled jobs
-- of a queue that match (ids, if given; last_error containing the text,
-- case-insensitive, if given) are retried, at most max_jobs; returns how
-- many. The same checks as wf_retry, job by job.
CREATE FUNCTION wf_retry_where(queue text, ids bigint[] DEFAULT NULL,
                               error_contains text DEFAULT NULL, max_jobs int DEFAULT 1000)
RETURNS int AS 'MODULE_PATHNAME', 'wf_retry_where' LANGUAGE C VOLATILE;

-- Cancels the matching jobs of a queue (blocked, pending, waiting, failed;
-- running ones are flagged), as wf_cancel does; statuses narrows them.
CREATE FUNCTION wf_cancel_where(queue text, ids bigint[] DEFAULT NULL,
                                error_contains text DEFAULT NULL, statuses text[] DEFAULT NULL,
                                max_jobs int DEFAULT 1000)
RETURNS int AS 'MODULE_PATHNAME', 'wf_cancel_where' LANGUAGE C VOLATILE;

-- Cron schedules.

-- Creates or replaces a cron schedule; returns its next run.
CREATE FUNCTION wf_schedule(name text, cron text, queue text, payload jsonb DEFAULT '{}')
RETURNS timestamptz AS 'MODULE_PATHNAME', 'wf_schedule' LANGUAGE C VOLATILE;

CREATE FUNCTION wf_unschedule(name text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_unschedule' LANGUAGE C VOLATILE;

-- Stops a schedule firing, or lets it fire again from its next tick after
-- now (no catching up); false if there is no such schedule.
CREATE FUNCTION wf_enable_schedule(name text, enabled boolean)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_enable_schedule' LANGUAGE C VOLATILE;

-- Rights per queue (src/pg/api/rights.hpp).

-- Grants a role a capability ('produce', 'work', 'signal', 'operate',
-- 'administer') on a queue or pattern, and EXECUTE on the functions that
-- use it. True if it is new. The caller must administer those queues.
CREATE FUNCTION wf_grant(role regrole, capability text, queues text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_grant' LANGUAGE C VOLATILE;

-- Takes a grant back (and EXECUTE on functions the role no longer needs).
CREATE FUNCTION wf_revoke(role regrole, capability text, queues text)
RETURNS boolean AS 'MODULE_PATHNAME', 'wf_revoke' LANGUAGE C VOLATILE;

------------------------------------------------------------------------------
-- Creation
------------------------------------------------------------------------------

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
ALTER TABLE wf.dedup OWNER TO wf_owner;
ALTER TABLE wf.ordered_group OWNER TO wf_owner;
ALTER TABLE wf.workflow_key OWNER TO wf_owner;
ALTER TABLE wf.child OWNER TO wf_owner;
ALTER TABLE wf.group_sentinel OWNER TO wf_owner;
ALTER VIEW wf.jobs OWNER TO wf_owner;
ALTER VIEW wf.job_states OWNER TO wf_owner;
ALTER VIEW wf.queue_stats OWNER TO wf_owner;
ALTER VIEW wf.workflows OWNER TO wf_owner;
ALTER VIEW wf.schedules OWNER TO wf_owner;
ALTER VIEW wf.grants OWNER TO wf_owner;
ALTER VIEW wf.key_stats OWNER TO wf_owner;
ALTER VIEW wf.version_stats OWNER TO wf_owner;
ALTER VIEW wf.metrics OWNER TO wf_owner;
GRANT USAGE ON SCHEMA wf TO PUBLIC;
GRANT SELECT ON wf.jobs, wf.job_states, wf.queue_stats, wf.key_stats, wf.workflows, wf.schedules, wf.grants
   TO PUBLIC;
GRANT SELECT ON wf.version_stats, wf.metrics TO PUBLIC;
ALTER FUNCTION wf._visible(text) OWNER TO wf_owner;
ALTER FUNCTION wf._administers(text) OWNER TO wf_owner;
ALTER FUNCTION wf._rate_left(text, text, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf._metrics() OWNER TO wf_owner;
ALTER FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text) OWNER TO wf_owner;
ALTER FUNCTION wf_enqueue_batch(text, jsonb, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_claim(text, text, int, interval, interval, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[]) OWNER TO wf_owner;
ALTER FUNCTION wf_heartbeat(text, bigint, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_complete(text, bigint, int, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) OWNER TO wf_owner;
ALTER FUNCTION wf_fail(text, bigint, int, text, interval, boolean) OWNER TO wf_owner;
ALTER FUNCTION wf_retry(text, bigint) OWNER TO wf_owner;
ALTER FUNCTION wf_cancel(text, bigint) OWNER TO wf_owner;
ALTER FUNCTION wf_sweep() OWNER TO wf_owner;
ALTER FUNCTION wf_recover_lost_claims() OWNER TO wf_owner;
ALTER FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text) OWNER TO wf_owner;
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
ALTER FUNCTION wf_start_child(text, bigint, int, text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_await_children(text, bigint, int, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_complete_with_steps(text, bigint, int, jsonb, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_progress(text, bigint, int, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_wait_job(text, bigint, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_wait_workflow(uuid, interval) OWNER TO wf_owner;
ALTER FUNCTION wf_signal_with_start(jsonb, text, jsonb) OWNER TO wf_owner;
ALTER FUNCTION wf_retry_where(text, bigint[], text, int) OWNER TO wf_owner;
ALTER FUNCTION wf_cancel_where(text, bigint[], text, text[], int) OWNER TO wf_owner;
ALTER FUNCTION wf_enable_schedule(text, boolean) OWNER TO wf_owner;
REVOKE EXECUTE ON FUNCTION wf_enqueue(text, jsonb, timestamptz, int, int, text, uuid, text, bigint[], text, text, text, interval, timestamptz, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_enqueue_batch(text, jsonb, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_claim(text, text, int, interval, interval, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_and_claim(text, bigint, int, jsonb, text, int, interval, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_heartbeat(text, bigint, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete(text, bigint, int, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_many(text, bigint[], int[], jsonb[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_fail(text, bigint, int, text, interval, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_retry(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_cancel(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_sweep() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_recover_lost_claims() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_configure_queue(text, int, interval, interval, interval, int, boolean, int, interval, int, int, boolean, boolean, interval, text) FROM PUBLIC;
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
REVOKE EXECUTE ON FUNCTION wf_start_child(text, bigint, int, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_await_children(text, bigint, int, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_complete_with_steps(text, bigint, int, jsonb, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_progress(text, bigint, int, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_wait_job(text, bigint, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_wait_workflow(uuid, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_signal_with_start(jsonb, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_retry_where(text, bigint[], text, int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_cancel_where(text, bigint[], text, text[], int) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf_enable_schedule(text, boolean) FROM PUBLIC;


-- 1.7: pg_wf on Citus (src/pg/citus/). Run by a superuser on the
-- coordinator; they run as their caller (Citus's functions need its rights).
CREATE FUNCTION wf_distribute() RETURNS void
AS 'MODULE_PATHNAME', 'wf_distribute' LANGUAGE C VOLATILE;
CREATE FUNCTION wf._take_id_range() RETURNS void
AS 'MODULE_PATHNAME', 'wf_take_id_range' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf_distribute() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._take_id_range() FROM PUBLIC;

-- 1.8: a distributed pg_wf's own calls into one shard group (a signal's
-- wake-up, a schedule's tick, a sweep by hand), which Citus sends to the
-- group's node (src/pg/citus/cluster_calls.hpp). pg_wf makes them as the
-- bootstrap superuser; anyone else is refused.
CREATE FUNCTION wf._wake_event(queue text, event text, payload jsonb) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_wake_event' LANGUAGE C VOLATILE;
CREATE FUNCTION wf._fire_tick(queue text, payload jsonb, run_at timestamptz,
                              idempotency_key text) RETURNS bigint
AS 'MODULE_PATHNAME', 'wf_group_fire_tick' LANGUAGE C VOLATILE;
CREATE FUNCTION wf._sweep_group(queue text) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_sweep' LANGUAGE C VOLATILE;
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
-- parent_queue ended; 'child' (1.9): a step of child workflow workflow_id
-- ended; 'cancel_child' (1.9): its parent was cancelled.
CREATE TABLE wf.outbox (
    id           bigserial PRIMARY KEY,
    kind         text     NOT NULL,
    parent_queue text,
    parent_ids   bigint[] NOT NULL,
    child_queue  text,
    child_id     bigint,
    role_name    text,
    made_at      timestamptz NOT NULL DEFAULT now(),
    workflow_id  uuid,
    CONSTRAINT outbox_kind_check CHECK (kind IN ('subscribe', 'ended', 'child', 'cancel_child'))
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
RETURNS text AS 'MODULE_PATHNAME', 'wf_group_subscribe' LANGUAGE C VOLATILE;
CREATE FUNCTION wf._parent_ended(queue text, parent_id bigint, status text, result jsonb, name text,
                                 children bigint[])
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_parent_ended' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._subscribe(text, bigint, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._parent_ended(text, bigint, text, jsonb, text, bigint[]) FROM PUBLIC;
-- In the parent's group, once it has ended: its end and its dependents in
-- other groups, taken (deleted) under its lock.
CREATE FUNCTION wf._take_dependents(queue text, parent_id bigint) RETURNS jsonb
AS 'MODULE_PATHNAME', 'wf_group_take_dependents' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._take_dependents(text, bigint) FROM PUBLIC;

-- 1.8, workflows on a distributed pg_wf: one shard group's steps of a
-- workflow wf_submit makes, and wf_cancel_workflow in one group.
CREATE FUNCTION wf._insert_steps(queue text, workflow_id uuid, steps jsonb, role text)
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_insert_steps' LANGUAGE C VOLATILE;
CREATE FUNCTION wf._cancel_workflow(queue text, workflow_id uuid)
RETURNS int AS 'MODULE_PATHNAME', 'wf_group_cancel_workflow' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._insert_steps(text, uuid, jsonb, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION wf._cancel_workflow(text, uuid) FROM PUBLIC;
CREATE FUNCTION wf._recover_lost_claims(queue text) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_recover_lost_claims' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._recover_lost_claims(text) FROM PUBLIC;

-- 1.9: in the parent's shard group, a child workflow's outcome joins its
-- parent's events, and a parent parked in wf_await_children with nothing
-- else to wait for goes back to pending (called by the node's worker).
CREATE FUNCTION wf._deliver_child(queue text, parent_id bigint, workflow_id uuid,
                                  name text, outcome jsonb) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_deliver_child' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._deliver_child(text, bigint, uuid, text, jsonb) FROM PUBLIC;
-- 1.9: wf._cancel_workflow for the worker (a cancelled parent's child).
CREATE FUNCTION wf._cancel_child(queue text, workflow_id uuid) RETURNS int
AS 'MODULE_PATHNAME', 'wf_group_cancel_child' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION wf._cancel_child(text, uuid) FROM PUBLIC;

-- Nothing attaches to pg_wf's tables: no trigger, rule or row security
-- (src/pg/runtime/attachments.hpp). pg_wf's functions and its worker write
-- them with pg_wf's rights, and what is attached would run with those
-- rights. What is there anyway stops pg_wf until it is removed.
CREATE FUNCTION wf._refuse_attachment() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'wf_refuse_attachment' LANGUAGE C;
CREATE EVENT TRIGGER wf_guard ON ddl_command_start
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE RULE', 'CREATE POLICY', 'ALTER POLICY', 'ALTER TABLE')
    EXECUTE FUNCTION wf._refuse_attachment();

-- Reports whether the background worker can serve this database (NOTICE if
-- not) and wakes the launcher so it does so at once.
CREATE FUNCTION wf._after_create() RETURNS void
AS 'MODULE_PATHNAME', 'wf_after_create' LANGUAGE C VOLATILE;
SELECT wf._after_create();
