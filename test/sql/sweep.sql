-- The reaper: expired leases and ended sessions give their jobs back; live
-- owners keep theirs. The background worker (wf.sweep_interval = 200ms in
-- test/pg_wf.conf) and wf_sweep() race for the same jobs, so this file
-- checks where jobs end up, never how many one sweep recovered.
-- Queues of this file: sw_*.

-- Waits until the job leaves `status` (or `timeout` passes) and returns its
-- status then.
CREATE FUNCTION sw_wait_until_not(q text, j bigint, status text,
                                  timeout interval DEFAULT '10 seconds')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + timeout;
    current text;
BEGIN
    LOOP
        SELECT s.status INTO current FROM wf.jobs s WHERE s.queue = q AND s.id = j;
        EXIT WHEN current IS DISTINCT FROM status OR clock_timestamp() > deadline;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN current;
END
$$;

-- A: a 50 ms lease that nobody renews.
SELECT wf_enqueue('sw_a', '{"n": "a"}') AS a \gset
SELECT attempt, lease_expires_at > now() AS has_deadline
  FROM wf_claim('sw_a', worker => 'slow', lease => '50 ms');
-- B: the same with its last attempt, and a job depending on it.
SELECT wf_enqueue('sw_b', '{"n": "b"}', max_attempts => 1) AS b \gset
SELECT wf_enqueue('sw_b', '{"n": "b child"}', depends_on => ARRAY[:b]) AS b_child \gset
SELECT count(*) FROM wf_claim('sw_b', lease => '50 ms');
-- C: cancelled while running, then its lease runs out.
SELECT wf_enqueue('sw_c', '{"n": "c"}') AS c \gset
SELECT count(*) FROM wf_claim('sw_c', lease => '50 ms');
SELECT wf_cancel('sw_c', :c) AS cancel_requested;
-- D: a lease kept alive by a heartbeat.
SELECT wf_enqueue('sw_d', '{"n": "d"}') AS d \gset
SELECT count(*) FROM wf_claim('sw_d', lease => '1 second');
SELECT wf_heartbeat('sw_d', :d, 1, extend => '1 hour') AS extended;
-- E: no lease; the owner is this session, which is alive.
SELECT wf_enqueue('sw_e', '{"n": "e"}') AS e \gset
SELECT count(*) FROM wf_claim('sw_e');
-- F: a long lease.
SELECT wf_enqueue('sw_f', '{"n": "f"}') AS f \gset
SELECT count(*) FROM wf_claim('sw_f', lease => '1 hour');

-- Past every short lease, and several sweep intervals.
SELECT pg_sleep(1.2);
-- The background worker recovers A, B and C by itself.
SELECT sw_wait_until_not('sw_a', :a, 'running') AS a,
       sw_wait_until_not('sw_b', :b, 'running') AS b,
       sw_wait_until_not('sw_c', :c, 'running') AS c;
-- A manual pass finds nothing more to do with them.
SELECT wf_sweep() >= 0 AS swept;

-- A is ready again, its error says what happened, its deadline is gone.
SELECT status, attempt, run_at <= now() AS due_now, lease_expires_at, worker,
       last_error LIKE 'worker lost: lease expired at % during attempt 1' AS lease_error
  FROM wf.jobs WHERE id = :a;
-- The slow worker's token is stale now.
SELECT wf_heartbeat('sw_a', :a, 1) AS heartbeat,
       wf_complete('sw_a', :a, 1, '{"late": true}') AS complete,
       wf_fail('sw_a', :a, 1, 'late') AS fail;
-- Someone else takes it, with the next attempt.
SELECT attempt FROM wf_claim('sw_a', worker => 'fast');
SELECT wf_complete('sw_a', :a, 2, '{"ok": true}') AS completed;
SELECT status, attempt, worker, result FROM wf.jobs WHERE id = :a;

-- B spent its last attempt: failed, and its dependent cancelled with a
-- reason that names B.
SELECT payload->>'n' AS job, status, finished_at IS NOT NULL AS finished
  FROM wf.jobs WHERE queue = 'sw_b' ORDER BY id;
SELECT last_error LIKE 'worker lost: lease expired at % during attempt 1' AS lease_error
  FROM wf.jobs WHERE id = :b;
SELECT last_error ~ ('\m' || :b || '\M') AS names_failed_job
  FROM wf.jobs WHERE id = :b_child;
-- wf_retry brings both back.
SELECT wf_retry('sw_b', :b) AS retried;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'sw_b' ORDER BY id;

-- C ends cancelled, not retried.
SELECT status, finished_at IS NOT NULL AS finished FROM wf.jobs WHERE id = :c;
SELECT count(*) AS claimed FROM wf_claim('sw_c');

-- D, E and F are still running and still ours.
SELECT payload->>'n' AS job, status, attempt FROM wf.jobs WHERE id IN (:d, :e, :f) ORDER BY id;
SELECT wf_heartbeat('sw_d', :d, 1) AS d_mine, wf_heartbeat('sw_e', :e, 1) AS e_mine,
       wf_heartbeat('sw_f', :f, 1) AS f_mine;
SELECT wf_sweep() >= 0 AS swept;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE id IN (:d, :e, :f) ORDER BY id;
SELECT wf_complete('sw_f', :f, 1) AS completed;

-- When the owner session ends, its jobs come back without waiting for any
-- lease: E (no lease) and G (claimed with max_attempts 1 left: failed).
SELECT wf_enqueue('sw_g', '{"n": "g"}', max_attempts => 1) AS g \gset
SELECT count(*) FROM wf_claim('sw_g');
SELECT pg_backend_pid() AS old_pid \gset
\c -
SELECT pg_backend_pid() <> :old_pid AS new_session;
SELECT sw_wait_until_not('sw_e', :e, 'running') AS e,
       sw_wait_until_not('sw_g', :g, 'running') AS g,
       sw_wait_until_not('sw_d', :d, 'running') AS d;
SELECT payload->>'n' AS job, status, attempt,
       replace(last_error, :'old_pid', '<old pid>') AS last_error
  FROM wf.jobs WHERE id IN (:d, :e, :g) ORDER BY id;
SELECT wf_heartbeat('sw_e', :e, 1) AS old_token;
SELECT attempt FROM wf_claim('sw_e');
