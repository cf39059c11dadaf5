-- wf_heartbeat, wf_complete and wf_fail, fenced by (queue, id, attempt).
-- Queues of this file: fin_*.

-- wf_heartbeat: true while the claim is ours.
SELECT wf_enqueue('fin_hb') AS j \gset
SELECT id = :j AS same_job, attempt FROM wf_claim('fin_hb');
SELECT wf_heartbeat('fin_hb', :j, 1) AS mine;
SELECT wf_heartbeat(queue => 'fin_hb', id => :j, attempt => 1, extend => NULL) AS mine;
-- Without a lease there is no deadline to extend ...
SELECT lease_expires_at FROM wf.jobs WHERE id = :j;
-- ... unless the heartbeat asks for one.
SELECT wf_heartbeat('fin_hb', :j, 1, extend => '10 minutes') AS mine;
SELECT lease_expires_at BETWEEN now() + interval '9 minutes' AND now() + interval '11 minutes'
       AS in_ten_minutes
  FROM wf.jobs WHERE id = :j;
-- Wrong attempt, wrong queue, unknown id: not ours, nothing changes.
SELECT wf_heartbeat('fin_hb', :j, 2) AS wrong_attempt,
       wf_heartbeat('fin_hb', :j, 0) AS attempt_zero,
       wf_heartbeat('fin_other', :j, 1) AS wrong_queue,
       wf_heartbeat('fin_hb', -1, 1) AS unknown_id;
SELECT wf_heartbeat('fin_hb', :j, 2, extend => '1 day') AS wrong_attempt_extend;
SELECT status, attempt, lease_expires_at < now() + interval '11 minutes' AS lease_unchanged
  FROM wf.jobs WHERE id = :j;

-- A job claimed with a lease: heartbeats keep it, `extend` sets a new deadline.
SELECT wf_enqueue('fin_hb_lease') AS j \gset
SELECT count(*) FROM wf_claim('fin_hb_lease', lease => '1 minute');
SELECT wf_heartbeat('fin_hb_lease', :j, 1) AS mine;
SELECT lease_expires_at BETWEEN now() + interval '50 seconds' AND now() + interval '70 seconds'
       AS one_lease_from_now
  FROM wf.jobs WHERE id = :j;
SELECT wf_heartbeat('fin_hb_lease', :j, 1, extend => '2 hours') AS mine;
SELECT lease_expires_at BETWEEN now() + interval '119 minutes' AND now() + interval '121 minutes'
       AS two_hours_from_now
  FROM wf.jobs WHERE id = :j;
-- Once finished, the job is no longer anyone's.
SELECT wf_complete('fin_hb_lease', :j, 1);
SELECT wf_heartbeat('fin_hb_lease', :j, 1) AS after_complete;

-- wf_complete: the result is stored, the job is done, the claim released.
SELECT wf_enqueue('fin_done', '{"n": 1}') AS j \gset
SELECT count(*) FROM wf_claim('fin_done', worker => 'w', lease => '1 hour');
-- Stale token, wrong queue, wrong id: false, and nothing changes.
SELECT wf_complete('fin_done', :j, 2, '{"stale": true}') AS wrong_attempt,
       wf_complete('fin_other', :j, 1, '{"stale": true}') AS wrong_queue,
       wf_complete('fin_done', :j + 1000000, 1, '{"stale": true}') AS wrong_id;
SELECT status, result, attempt, finished_at IS NULL AS unfinished,
       lease_expires_at IS NOT NULL AS has_lease
  FROM wf.jobs WHERE id = :j;
SELECT wf_complete('fin_done', :j, 1, '{"sent": 3, "ids": [1, 2, 3]}') AS completed;
SELECT status, result, attempt, worker, last_error, finished_at IS NOT NULL AS finished,
       finished_at >= started_at AS in_order, lease_expires_at
  FROM wf.jobs WHERE id = :j;
-- A second completion of the same attempt is refused: one result per job.
SELECT wf_complete('fin_done', :j, 1, '{"again": true}') AS second_complete;
SELECT wf_fail('fin_done', :j, 1, 'too late') AS fail_after_complete;
SELECT status, result FROM wf.jobs WHERE id = :j;
-- The result is optional.
SELECT wf_enqueue('fin_done', '{"n": 2}') AS j \gset
SELECT count(*) FROM wf_claim('fin_done');
SELECT wf_complete(queue => 'fin_done', id => :j, attempt => 1) AS completed;
SELECT status, result FROM wf.jobs WHERE id = :j;
-- A JSON null result is a result.
SELECT wf_enqueue('fin_done', '{"n": 3}') AS j \gset
SELECT count(*) FROM wf_claim('fin_done');
SELECT wf_complete('fin_done', :j, 1, 'null') AS completed;
SELECT status, result, result IS NULL AS sql_null FROM wf.jobs WHERE id = :j;
-- Completing is part of the caller's transaction.
SELECT wf_enqueue('fin_done', '{"n": 4}') AS j \gset
SELECT count(*) FROM wf_claim('fin_done');
BEGIN;
SELECT wf_complete('fin_done', :j, 1, '{"n": 4}') AS completed;
ROLLBACK;
SELECT status, result FROM wf.jobs WHERE id = :j;
SELECT wf_heartbeat('fin_done', :j, 1) AS still_mine;

-- wf_fail: back to pending after a backoff (1 s doubling, +-25% jitter by
-- default), with the error kept.
SELECT wf_enqueue('fin_fail', '{"n": 1}') AS j \gset
SELECT count(*) FROM wf_claim('fin_fail');
-- (In one transaction, so that now() is the time of the failure.)
BEGIN;
SELECT wf_fail('fin_fail', :j, 1, 'connection refused') AS status;
SELECT status, attempt, max_attempts, last_error,
       run_at - now() BETWEEN interval '0.75 s' AND interval '1.25 s' AS backoff_1s_jitter,
       lease_expires_at, finished_at
  FROM wf.jobs WHERE id = :j;
COMMIT;
-- Not claimable before its run_at.
SELECT count(*) AS claimed FROM wf_claim('fin_fail');
-- The token of that attempt is spent.
SELECT wf_fail('fin_fail', :j, 1, 'again') AS stale_fail,
       wf_complete('fin_fail', :j, 1) AS stale_complete,
       wf_heartbeat('fin_fail', :j, 1) AS stale_heartbeat;
SELECT wf_fail('fin_other', :j, 1, 'x') AS wrong_queue, wf_fail('fin_fail', -1, 1, 'x') AS wrong_id;
SELECT status, last_error FROM wf.jobs WHERE id = :j;

-- retry_in overrides the backoff (no jitter); '0' retries at once.
SELECT wf_enqueue('fin_retry_in', '{}', max_attempts => 10) AS j \gset
SELECT attempt FROM wf_claim('fin_retry_in');
SELECT wf_fail('fin_retry_in', :j, 1, 'flaky', retry_in => '0') AS status;
SELECT run_at <= now() AS due_now FROM wf.jobs WHERE id = :j;
SELECT attempt FROM wf_claim('fin_retry_in');
BEGIN;
SELECT wf_fail('fin_retry_in', :j, 2, 'rate limited', retry_in => '1 hour') AS status;
SELECT status, last_error, run_at = now() + interval '1 hour' AS in_one_hour
  FROM wf.jobs WHERE id = :j;
COMMIT;
SELECT count(*) AS claimed FROM wf_claim('fin_retry_in');

-- permanent => true: straight to failed (the dead letter), whatever the
-- attempts left.
SELECT wf_enqueue('fin_perm', '{}', max_attempts => 10) AS j \gset
SELECT count(*) FROM wf_claim('fin_perm');
SELECT wf_fail('fin_perm', :j, 1, 'invalid address', permanent => true) AS status;
SELECT status, attempt, max_attempts, last_error, finished_at IS NOT NULL AS finished
  FROM wf.jobs WHERE id = :j;
SELECT count(*) AS claimed FROM wf_claim('fin_perm');

-- Attempts exhausted: failed, with the last error kept.
SELECT wf_enqueue('fin_exhaust', '{}', max_attempts => 2) AS j \gset
SELECT attempt FROM wf_claim('fin_exhaust');
SELECT wf_fail('fin_exhaust', :j, 1, 'first error', retry_in => '0') AS status;
SELECT attempt FROM wf_claim('fin_exhaust');
SELECT wf_fail('fin_exhaust', :j, 2, 'second error', retry_in => '0') AS status;
SELECT status, attempt, max_attempts, last_error, finished_at IS NOT NULL AS finished
  FROM wf.jobs WHERE id = :j;
SELECT count(*) AS claimed FROM wf_claim('fin_exhaust');
-- A failed job is not completed by a late worker.
SELECT wf_complete('fin_exhaust', :j, 2, '{"late": true}') AS late_complete;
SELECT status, result FROM wf.jobs WHERE id = :j;

-- max_attempts => 1: the first failure is final.
SELECT wf_enqueue('fin_once', '{}', max_attempts => 1) AS j \gset
SELECT count(*) FROM wf_claim('fin_once');
SELECT wf_fail('fin_once', :j, 1, 'only try') AS status;
