-- wf_retry (replay from the dead letter) and wf_cancel. Queues: rc_*.

-- wf_retry: a failed job runs again with a fresh budget of attempts; the
-- attempt counter (the fencing token) keeps counting.
SELECT wf_enqueue('rc_retry', '{"n": 1}', max_attempts => 2) AS j \gset
SELECT attempt FROM wf_claim('rc_retry');
SELECT wf_fail('rc_retry', :j, 1, 'first', retry_in => '0');
SELECT attempt FROM wf_claim('rc_retry');
SELECT wf_fail('rc_retry', :j, 2, 'second', retry_in => '0');
SELECT status, attempt, max_attempts, last_error FROM wf.jobs WHERE id = :j;
SELECT wf_retry('rc_retry', :j) AS retried;
SELECT status, attempt, max_attempts, run_at <= now() AS due_now, finished_at
  FROM wf.jobs WHERE id = :j;
SELECT attempt FROM wf_claim('rc_retry');
-- The old attempts' tokens stay stale.
SELECT wf_complete('rc_retry', :j, 2) AS stale;
SELECT wf_fail('rc_retry', :j, 3, 'third', retry_in => '0');
SELECT attempt FROM wf_claim('rc_retry');
SELECT wf_complete('rc_retry', :j, 4, '{"ok": true}') AS completed;
SELECT status, attempt, result FROM wf.jobs WHERE id = :j;

-- wf_retry of a job that is not failed or cancelled: false, nothing changes.
SELECT wf_retry('rc_retry', :j) AS done_job;
SELECT wf_enqueue('rc_retry', '{"n": 2}') AS p \gset
SELECT wf_retry('rc_retry', :p) AS pending_job;
SELECT count(*) FROM wf_claim('rc_retry');
SELECT wf_retry('rc_retry', :p) AS running_job;
SELECT wf_enqueue('rc_retry', '{"n": 3}', depends_on => ARRAY[:p]) AS b \gset
SELECT wf_retry('rc_retry', :b) AS blocked_job;
SELECT wf_retry('rc_retry', -1) AS unknown_id;
SELECT payload, status, attempt FROM wf.jobs WHERE queue = 'rc_retry' ORDER BY id;
-- The queue is part of the address.
SELECT wf_enqueue('rc_addr', '{}', max_attempts => 1) AS a \gset
SELECT count(*) FROM wf_claim('rc_addr');
SELECT wf_fail('rc_addr', :a, 1, 'x');
SELECT wf_retry('rc_other', :a) AS wrong_queue, wf_cancel('rc_other', :a) AS wrong_queue_cancel;
SELECT status FROM wf.jobs WHERE id = :a;
-- A retry rolled back leaves the job failed.
BEGIN;
SELECT wf_retry('rc_addr', :a) AS retried;
ROLLBACK;
SELECT status FROM wf.jobs WHERE id = :a;

-- wf_cancel of a pending job: cancelled at once, never claimed.
SELECT wf_enqueue('rc_cancel', '{"n": "pending"}') AS j \gset
SELECT wf_cancel('rc_cancel', :j) AS cancelled;
SELECT status, last_error, finished_at IS NOT NULL AS finished FROM wf.jobs WHERE id = :j;
SELECT count(*) AS claimed FROM wf_claim('rc_cancel');
-- Twice: nothing more to cancel.
SELECT wf_cancel('rc_cancel', :j) AS again;
-- A scheduled job too.
SELECT wf_enqueue('rc_cancel', '{"n": "later"}', run_at => now() + interval '1 day') AS j2 \gset
SELECT wf_cancel('rc_cancel', :j2) AS cancelled;
SELECT status FROM wf.jobs WHERE id = :j2;
-- A cancelled job can be retried.
SELECT wf_retry('rc_cancel', :j) AS retried;
SELECT status, run_at <= now() AS due_now FROM wf.jobs WHERE id = :j;
SELECT payload FROM wf_claim('rc_cancel');
-- A done job cannot be cancelled; a failed one can (given up for good),
-- its error kept.
SELECT wf_complete('rc_cancel', :j, 1);
SELECT wf_cancel('rc_cancel', :j) AS done_job;
SELECT wf_cancel('rc_addr', :a) AS failed_job;
SELECT wf_cancel('rc_addr', :a) AS again;
SELECT wf_cancel('rc_cancel', -1) AS unknown_id;
SELECT status, last_error FROM wf.jobs WHERE id IN (:j, :a) ORDER BY id;

-- Cancelling a blocked job, or a job others wait on, cancels what depends
-- on it, transitively.
SELECT wf_enqueue('rc_tree', '{"n": "root"}') AS r \gset
SELECT wf_enqueue('rc_tree', '{"n": "mid"}', depends_on => ARRAY[:r]) AS m \gset
SELECT wf_enqueue('rc_tree', '{"n": "leaf"}', depends_on => ARRAY[:m]) AS l \gset
SELECT wf_cancel('rc_tree', :m) AS cancelled;
SELECT payload->>'n' AS job, status, replace(last_error, :'m', '<mid>') AS last_error
  FROM wf.jobs WHERE queue = 'rc_tree' ORDER BY id;
-- The root is untouched and runs; it releases nothing.
SELECT payload->>'n' AS job FROM wf_claim('rc_tree', max_jobs => 10);
SELECT wf_complete('rc_tree', :r, 1);
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'rc_tree' ORDER BY id;
-- Retrying the cancelled job brings back what its cancellation took with it.
SELECT wf_retry('rc_tree', :m) AS retried;
SELECT payload->>'n' AS job, status, last_error FROM wf.jobs WHERE queue = 'rc_tree' ORDER BY id;

-- wf_cancel of a running job: it is flagged and keeps running until its
-- worker hears of it (heartbeat false), then ends cancelled.
SELECT wf_enqueue('rc_run', '{"n": "running"}') AS j \gset
SELECT wf_enqueue('rc_run', '{"n": "dependent"}', depends_on => ARRAY[:j]) AS d \gset
SELECT payload->>'n' AS job, attempt FROM wf_claim('rc_run');
SELECT wf_heartbeat('rc_run', :j, 1) AS before_cancel;
SELECT wf_cancel('rc_run', :j) AS cancelled;
SELECT status, cancel_requested, finished_at FROM wf.jobs WHERE id = :j;
-- Cancelling again: already requested.
SELECT wf_cancel('rc_run', :j) AS again;
SELECT wf_heartbeat('rc_run', :j, 1) AS after_cancel,
       wf_heartbeat('rc_run', :j, 1, extend => '1 hour') AS extend_after_cancel;
-- Its completion is refused; the job ends cancelled, and so does its dependent.
SELECT wf_complete('rc_run', :j, 1, '{"too": "late"}') AS completed;
-- (A refused completion records no result.)
SELECT payload->>'n' AS job, status, replace(last_error, :'j', '<running>') AS last_error,
       finished_at IS NOT NULL AS finished, result
  FROM wf.jobs WHERE queue = 'rc_run' ORDER BY id;
-- Retried, it runs again with a new attempt and a clean flag.
SELECT wf_retry('rc_run', :j) AS retried;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'rc_run' ORDER BY id;
SELECT payload->>'n' AS job, attempt FROM wf_claim('rc_run');
SELECT status, cancel_requested FROM wf.jobs WHERE id = :j;
SELECT wf_heartbeat('rc_run', :j, 2) AS mine;
SELECT wf_complete('rc_run', :j, 2, '{"second": "run"}') AS completed;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'rc_run' ORDER BY id;

-- A running job cancelled and then failed by its worker ends cancelled too,
-- not retried.
SELECT wf_enqueue('rc_run_fail', '{}', max_attempts => 5) AS j \gset
SELECT count(*) FROM wf_claim('rc_run_fail');
SELECT wf_cancel('rc_run_fail', :j) AS cancelled;
SELECT wf_fail('rc_run_fail', :j, 1, 'interrupted') AS status;
SELECT status, last_error, finished_at IS NOT NULL AS finished FROM wf.jobs WHERE id = :j;
SELECT count(*) AS claimed FROM wf_claim('rc_run_fail');
