-- Operator actions on many jobs (wf_retry_where, wf_cancel_where), schedules
-- stopped and restarted (wf_enable_schedule), and the counters of wf.metrics.
\set VERBOSITY terse

-- Five jobs of queue ob: three fail for good (two with "timeout" in their
-- error), one waits in line, one runs.
SELECT count(*) FROM (
  SELECT wf_enqueue('ob', jsonb_build_object('n', n), max_attempts => 1) FROM generate_series(1, 5) n) e;
SELECT wf_fail('ob', id, attempt, CASE WHEN (payload ->> 'n')::int < 3 THEN 'upstream timeout' ELSE 'bad input' END)
  FROM wf_claim('ob', max_jobs => 3) ORDER BY id;
SELECT count(*) FROM wf_claim('ob');   -- job 4 runs (this session holds it)
CREATE TEMP VIEW ob_jobs AS
  SELECT string_agg((payload ->> 'n') || ':' || status, ', ' ORDER BY id) AS jobs FROM wf.jobs WHERE queue = 'ob';
SELECT * FROM ob_jobs;

-- Bad input: an error, and nothing changes.
SELECT try_sql($$SELECT wf_retry_where(NULL)$$);
SELECT try_sql($$SELECT wf_retry_where('ob', ARRAY[1, NULL]::bigint[])$$);
SELECT try_sql($$SELECT wf_retry_where('ob', max_jobs => 0)$$);
SELECT try_sql($$SELECT wf_cancel_where('ob', statuses => '{done}')$$);
SELECT try_sql($$SELECT wf_cancel_where('ob', statuses => ARRAY['failed', NULL])$$);
SELECT try_sql($$SELECT wf_enable_schedule(NULL, true)$$);
SELECT try_sql($$SELECT wf_enable_schedule('nope', NULL)$$);
SELECT * FROM ob_jobs;

-- Retry by the text of the error (case-insensitive): the two timeouts.
SELECT wf_retry_where('ob', error_contains => 'TIMEOUT');
SELECT * FROM ob_jobs;
-- Cancel what waits in line (the two retried jobs, job 5); the running job
-- is not in `statuses`.
SELECT wf_cancel_where('ob', statuses => '{pending}');
SELECT * FROM ob_jobs;
-- A running job is flagged; a failed one is given up.
SELECT wf_cancel_where('ob', statuses => '{running, failed}');
SELECT * FROM ob_jobs;
SELECT cancel_requested FROM wf.jobs WHERE queue = 'ob' AND payload ->> 'n' = '4';
-- By ids, at most max_jobs: cancelled jobs come back.
SELECT wf_retry_where('ob', ids => (SELECT array_agg(id) FROM wf.jobs WHERE queue = 'ob'), max_jobs => 2);
SELECT * FROM ob_jobs;

-- A role without operate may not; with it, it may.
CREATE ROLE ob_viewer;
SET ROLE ob_viewer;
SELECT try_sql($$SELECT wf_retry_where('ob')$$);
RESET ROLE;
SELECT wf_grant('ob_viewer', 'operate', 'ob');
SET ROLE ob_viewer;
SELECT wf_cancel_where('ob', statuses => '{pending}');
RESET ROLE;
SELECT * FROM ob_jobs;
SELECT wf_revoke('ob_viewer', 'operate', 'ob');

-- Schedules: stopped, a stopped one does not fire; restarted, it fires from
-- its next tick on.
SELECT wf_schedule('ob-minutely', '* * * * *', 'ob_sched') IS NOT NULL AS scheduled;
SELECT wf_enable_schedule('ob-minutely', false), wf_enable_schedule('nope', false);
UPDATE wf.schedule SET next_run_at = now() - interval '1 minute' WHERE name = 'ob-minutely';
SELECT wf_sweep() >= 0 AS swept;
SELECT count(*) AS fired FROM wf.jobs WHERE queue = 'ob_sched';
SELECT enabled FROM wf.schedules WHERE name = 'ob-minutely';
SELECT wf_enable_schedule('ob-minutely', true);
SELECT enabled, next_run > now() AS next_run_ahead FROM wf.schedules WHERE name = 'ob-minutely';
SELECT wf_unschedule('ob-minutely');

-- wf.metrics counts what committed, per queue (the counters live as long as
-- the server: this checks what this test added).
CREATE TEMP TABLE ob_before AS SELECT * FROM wf.metrics WHERE queue = 'ob_m';
SELECT wf_enqueue('ob_m', '{}') IS NOT NULL;
SELECT wf_enqueue('ob_m', '{}') IS NOT NULL;
BEGIN;
SELECT wf_enqueue('ob_m', '{}') IS NOT NULL;   -- rolled back: not counted
ROLLBACK;
SELECT wf_complete('ob_m', id, attempt) FROM wf_claim('ob_m');
SELECT wf_fail('ob_m', id, attempt, 'again', retry_in => '0') FROM wf_claim('ob_m');
SELECT m.enqueued - coalesce(b.enqueued, 0) AS enqueued, m.claimed - coalesce(b.claimed, 0) AS claimed,
       m.completed - coalesce(b.completed, 0) AS completed, m.retried - coalesce(b.retried, 0) AS retried
  FROM wf.metrics m LEFT JOIN ob_before b ON true WHERE m.queue = 'ob_m';
-- A role sees the counters of the queues it holds a right on only.
SET ROLE ob_viewer;
SELECT count(*) AS seen FROM wf.metrics;
SELECT count(*) AS seen_directly FROM wf._metrics();
RESET ROLE;

-- observe: a right to read and nothing else (a dashboard's, an exporter's).
SELECT wf_submit('{"name": "ob-flow", "queue": "ob_wf", "steps": [{"name": "a"}]}') IS NOT NULL;
SELECT wf_grant('ob_viewer', 'observe', 'ob*');
SET ROLE ob_viewer;
SELECT count(*) AS queues_seen FROM wf.queue_stats WHERE queue IN ('ob', 'ob_m', 'ob_wf');
SELECT count(*) > 0 AS metrics_seen FROM wf.metrics WHERE queue = 'ob_m';
SELECT wf_workflow(workflow_id) ->> 'status' AS status FROM wf.workflows WHERE name = 'ob-flow';
SELECT try_sql($$SELECT wf_cancel('ob', 1)$$);
SELECT try_sql($$SELECT wf_enqueue('ob', '{}')$$);
RESET ROLE;
SELECT wf_revoke('ob_viewer', 'observe', 'ob*');
SET ROLE ob_viewer;
SELECT try_sql($$SELECT wf_workflow(workflow_id) FROM wf.workflows$$) AS after_revoke;
SELECT count(*) AS queues_seen FROM wf.queue_stats;
RESET ROLE;
DROP ROLE ob_viewer;
