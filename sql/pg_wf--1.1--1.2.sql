-- pg_wf 1.1 -> 1.2: a claim writes no job row. CREATE EXTENSION runs the
-- earlier scripts and then this one; ALTER EXTENSION pg_wf UPDATE runs it on
-- an existing 1.1.
\echo Use "ALTER EXTENSION pg_wf UPDATE" to load this file. \quit

-- A running attempt now lives only in its claim row (unlogged): who runs it,
-- since when, and its attempt number. The job row keeps the last attempt
-- that ended, and says `pending` while the job runs. A claim writes to WAL
-- only the removal of the job's ready row -- which is also what makes a
-- claim survive a crash: a pending job with neither a ready row nor a claim
-- lost its claim in a crash (or a failover), and recovery counts that
-- attempt (see reaper.cpp). Completion, failure and recovery write the
-- attempt, worker and start time into the job row.
ALTER TABLE wf.claim ADD COLUMN worker     text,
                     ADD COLUMN owner_pid  int,
                     ADD COLUMN started_at timestamptz;

-- Running jobs of 1.1 keep their claims: the claim row gets the attempt's
-- details, the job row goes back to the attempt before.
UPDATE wf.claim c SET worker = j.worker, owner_pid = j.owner_pid, started_at = j.started_at
  FROM wf.job j
 WHERE j.queue = c.queue AND j.id = c.id AND j.attempt = c.attempt AND j.status = 'running';
UPDATE wf.job SET status = 'pending', attempt = attempt - 1 WHERE status = 'running';

-- Status, attempt, worker and start of a running job come from its claim.
CREATE OR REPLACE VIEW wf.jobs AS
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
                           AND w.attempt = j.attempt;

-- The status the counting views show, from logged tables only, so that
-- they work on a hot standby too (wf.jobs does not: unlogged tables cannot
-- be read there): a pending job without its ready row is running (or its
-- claim was lost and awaits recovery).
CREATE VIEW wf.job_states AS
SELECT j.queue, j.id, j.workflow_id, j.run_at, j.created_at, j.finished_at,
       CASE WHEN j.status = 'pending' AND NOT EXISTS (
                 SELECT 1 FROM wf.ready r WHERE r.queue = j.queue AND r.priority = j.priority
                    AND r.run_at = j.run_at AND r.id = j.id)
            THEN 'running' ELSE j.status END AS status
  FROM wf.job j;

CREATE OR REPLACE VIEW wf.queue_stats AS
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
        SELECT queue, NULL, NULL FROM wf.queue_config) AS q
 GROUP BY queue;

CREATE OR REPLACE VIEW wf.workflows AS
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

-- Claims are not dumped (wf.claim is unlogged and holds sessions): a job
-- that ran while a dump was taken is restored pending without a ready row.
-- Run once after a restore has finished; returns the jobs given back.
CREATE FUNCTION wf_recover_lost_claims()
RETURNS int AS 'MODULE_PATHNAME', 'wf_recover_lost_claims' LANGUAGE C VOLATILE
SET jit = off;
