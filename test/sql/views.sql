-- The views users read: wf.jobs (one row per job) and wf.queue_stats (one
-- row per queue). Queues of this file: vw_*.

-- wf.jobs has at least the columns of the contract, with these types.
SELECT want.col, c.data_type
  FROM unnest(ARRAY['id', 'queue', 'status', 'payload', 'result', 'attempt', 'max_attempts',
                    'priority', 'run_at', 'idempotency_key', 'workflow_id', 'step_name',
                    'depends_on', 'last_error', 'worker', 'lease_expires_at', 'created_at',
                    'started_at', 'finished_at']) WITH ORDINALITY AS want(col, n)
  LEFT JOIN information_schema.columns c
    ON c.table_schema = 'wf' AND c.table_name = 'jobs' AND c.column_name = want.col
 ORDER BY want.n;
-- wf.queue_stats: the queue, one count per status, the age of the oldest
-- ready job.
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_schema = 'wf' AND table_name = 'queue_stats' ORDER BY ordinal_position;

-- One queue with a job in each status a test can reach here.
SELECT wf_enqueue('vw_a', '{"n": "done"}') AS done \gset
SELECT wf_enqueue('vw_a', '{"n": "failed"}', max_attempts => 1) AS failed \gset
SELECT wf_enqueue('vw_a', '{"n": "running"}') AS running \gset
SELECT count(*) FROM wf_claim('vw_a', max_jobs => 3);
SELECT wf_complete('vw_a', :done, 1);
SELECT wf_fail('vw_a', :failed, 1, 'x');
SELECT wf_enqueue('vw_a', '{"n": "cancelled"}') AS cancelled \gset
SELECT wf_cancel('vw_a', :cancelled);
SELECT wf_enqueue('vw_a', '{"n": "pending, old"}', run_at => '2000-01-01 00:00:00+00') AS old \gset
SELECT wf_enqueue('vw_a', '{"n": "pending, later"}', run_at => now() + interval '1 day') IS NOT NULL;
SELECT wf_enqueue('vw_a', '{"n": "blocked"}', depends_on => ARRAY[:running]) IS NOT NULL;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'vw_a' ORDER BY id;
-- One row per job.
SELECT count(*) AS rows, count(DISTINCT (queue, id)) AS jobs FROM wf.jobs WHERE queue = 'vw_a';

-- The counts, and the age of the oldest job that is ready now.
SELECT queue, blocked, pending, running, waiting, done, failed, cancelled,
       oldest_ready_age > interval '20 years' AS old_job_waiting
  FROM wf.queue_stats WHERE queue = 'vw_a';
-- Once it runs, the scheduled job does not count as ready.
SELECT payload->>'n' AS job FROM wf_claim('vw_a');
SELECT pending, running, oldest_ready_age FROM wf.queue_stats WHERE queue = 'vw_a';
-- A queue with only a fresh job: a small, non-negative age.
SELECT wf_enqueue('vw_b') IS NOT NULL AS enqueued;
SELECT queue, pending, oldest_ready_age >= interval '0' AND oldest_ready_age < interval '1 hour'
       AS fresh
  FROM wf.queue_stats WHERE queue = 'vw_b';
-- A configured queue without jobs has a row of zeros.
SELECT wf_configure_queue('vw_empty', paused => true);
SELECT * FROM wf.queue_stats WHERE queue = 'vw_empty';
-- A queue nobody configured or used has no row.
SELECT count(*) FROM wf.queue_stats WHERE queue = 'vw_unknown';
-- One row per queue.
SELECT count(*) = count(DISTINCT queue) AS one_row_per_queue FROM wf.queue_stats;

-- No run_at a caller can pass breaks the views: a job scheduled at
-- -infinity is either refused by wf_enqueue or shown.
SELECT try_sql($$SELECT wf_enqueue('vw_inf', run_at => '-infinity')$$) ~ '^(ok|22)' AS handled;
SELECT try_sql($$SELECT max(oldest_ready_age) FROM wf.queue_stats$$) AS queue_stats;
SELECT try_sql($$SELECT * FROM wf.queue_stats WHERE queue = 'vw_inf'$$) AS queue_stats;
SELECT try_sql($$SELECT max(run_at) FROM wf.jobs$$) AS jobs;
