-- wf_claim: how many, in what order, what it records; paused queues,
-- max_running, leases and waiting. Queues of this file: claim_*.

SELECT count(*) AS enqueued FROM wf_enqueue_batch('claim_n',
       '[{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}, {"n": 5}, {"n": 6}]');
-- The default takes one job.
SELECT payload, attempt FROM wf_claim('claim_n');
-- max_jobs takes up to that many, in claim order.
SELECT payload, attempt FROM wf_claim('claim_n', max_jobs => 2);
SELECT payload, attempt FROM wf_claim('claim_n', max_jobs => 1);
-- More than are ready: what there is.
SELECT payload, attempt FROM wf_claim('claim_n', max_jobs => 10);
SELECT count(*) AS claimed FROM wf_claim('claim_n', max_jobs => 10);
SELECT status, count(*) FROM wf.jobs WHERE queue = 'claim_n' GROUP BY status;
-- An unknown queue has nothing, and is no error.
SELECT count(*) AS claimed FROM wf_claim('claim_no_such_queue');

-- What a claim records: running, attempt + 1, the worker, started_at, the
-- owner; without a lease there is no deadline (ownership is the session).
SELECT wf_enqueue('claim_rec', '{"n": 1}') AS j \gset
SELECT id = :j AS same_job, attempt, lease_expires_at FROM wf_claim('claim_rec', worker => 'w-1');
SELECT status, attempt, worker, started_at IS NOT NULL AS started, lease_expires_at,
       owner_pid = pg_backend_pid() AS owned_by_me, finished_at
  FROM wf.jobs WHERE id = :j;
-- Without a worker name the claim names the session.
SELECT wf_enqueue('claim_rec', '{"n": 2}') AS j \gset
SELECT count(*) FROM wf_claim('claim_rec');
SELECT worker = 'pid ' || pg_backend_pid() AS worker_is_pid FROM wf.jobs WHERE id = :j;
-- The attempt goes up with each claim of the same job.
SELECT wf_fail('claim_rec', :j, 1, 'try again', retry_in => '0');
SELECT id = :j AS same_job, attempt FROM wf_claim('claim_rec', worker => 'w-2');
SELECT wf_fail('claim_rec', :j, 2, 'try again', retry_in => '0');
SELECT id = :j AS same_job, attempt FROM wf_claim('claim_rec', worker => 'w-3');
SELECT status, attempt, worker FROM wf.jobs WHERE id = :j;

-- A claim is part of the caller's transaction: rolled back, the job is ready
-- again and its attempt unchanged.
SELECT wf_enqueue('claim_tx') AS j \gset
BEGIN;
SELECT id = :j AS same_job, attempt FROM wf_claim('claim_tx');
ROLLBACK;
SELECT status, attempt, worker FROM wf.jobs WHERE id = :j;
SELECT id = :j AS same_job, attempt FROM wf_claim('claim_tx');

-- A lease sets a deadline: lease_expires_at = claim time + lease.
SELECT wf_enqueue('claim_lease') AS j \gset
SELECT lease_expires_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
       AS in_one_hour
  FROM wf_claim('claim_lease', lease => '1 hour');
SELECT status, lease_expires_at BETWEEN now() + interval '59 minutes'
                                    AND now() + interval '61 minutes' AS in_one_hour
  FROM wf.jobs WHERE id = :j;

-- A paused queue hands out nothing; unpaused, it does again.
SELECT count(*) FROM wf_enqueue_batch('claim_paused', '[1, 2]');
SELECT wf_configure_queue('claim_paused', paused => true);
SELECT count(*) AS claimed FROM wf_claim('claim_paused', max_jobs => 10);
SELECT status, count(*) FROM wf.jobs WHERE queue = 'claim_paused' GROUP BY status;
SELECT wf_configure_queue('claim_paused', paused => false);
SELECT payload FROM wf_claim('claim_paused', max_jobs => 10);

-- max_running caps the running jobs of the queue, whoever claims them.
SELECT count(*) FROM wf_enqueue_batch('claim_limit', '[1, 2, 3, 4, 5]');
SELECT wf_configure_queue('claim_limit', max_running => 2);
SELECT payload FROM wf_claim('claim_limit', max_jobs => 10);
SELECT count(*) AS claimed FROM wf_claim('claim_limit', max_jobs => 10);
-- A finished job frees a slot.
SELECT id AS done_id FROM wf.jobs WHERE queue = 'claim_limit' AND status = 'running'
 ORDER BY id LIMIT 1 \gset
SELECT wf_complete('claim_limit', :done_id, 1);
SELECT payload FROM wf_claim('claim_limit', max_jobs => 10);
-- A higher limit lets more run.
SELECT wf_configure_queue('claim_limit', max_running => 3);
SELECT payload FROM wf_claim('claim_limit', max_jobs => 10);
SELECT count(*) AS claimed FROM wf_claim('claim_limit', max_jobs => 10);
SELECT status, count(*) FROM wf.jobs WHERE queue = 'claim_limit' GROUP BY status ORDER BY status;

-- wait: with nothing to claim, wf_claim blocks up to `wait`, then returns
-- nothing.
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS claimed FROM wf_claim('claim_wait', wait => '250 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '240 ms' AS waited;
-- A paused queue makes a claimer wait too.
SELECT wf_enqueue('claim_wait_paused') IS NOT NULL AS enqueued;
SELECT wf_configure_queue('claim_wait_paused', paused => true);
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS claimed FROM wf_claim('claim_wait_paused', wait => '250 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '240 ms' AS waited;
-- A ready job is returned at once, wait or not.
SELECT wf_enqueue('claim_wait', '{"n": "ready"}') IS NOT NULL AS enqueued;
SELECT clock_timestamp() AS t0 \gset
SELECT payload FROM wf_claim('claim_wait', wait => '10 seconds');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 seconds' AS returned_at_once;
-- A job that becomes due during the wait ends it.
SELECT wf_enqueue('claim_wait', '{"n": "soon"}',
                  run_at => clock_timestamp() + interval '500 ms') IS NOT NULL AS enqueued;
SELECT count(*) AS claimed_now FROM wf_claim('claim_wait');
SELECT clock_timestamp() AS t0 \gset
SELECT payload FROM wf_claim('claim_wait', wait => '10 seconds');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 seconds' AS returned_when_due;
-- wait => '0' does not wait.
SELECT count(*) AS claimed FROM wf_claim('claim_wait', wait => '0');
-- A waiting claim can be cancelled like any statement; afterwards claims
-- work as before.
SET statement_timeout = '200ms';
SELECT count(*) FROM wf_claim('claim_wait', wait => '10 seconds');
RESET statement_timeout;
SELECT wf_enqueue('claim_wait', '{"n": "after cancel"}') IS NOT NULL AS enqueued;
SELECT payload FROM wf_claim('claim_wait', wait => '10 seconds');
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS claimed FROM wf_claim('claim_wait', wait => '100 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '90 ms' AS waited;

-- A claim takes its ready rows without the executor (ready_set.cpp), yet
-- with the executor's checks: a read-only transaction gets 25006, and the
-- job stays claimable. (A role with table privileges but no right to work
-- in the queue gets 42501 before any of it: see security.sql.)
SELECT wf_enqueue('claim_checks', '{"n": "guarded"}') IS NOT NULL AS enqueued;
CREATE ROLE claim_reader;
GRANT USAGE ON SCHEMA wf TO claim_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA wf TO claim_reader;
GRANT INSERT, UPDATE, DELETE ON wf.claim TO claim_reader;
SET ROLE claim_reader;
SELECT try_sql($$SELECT * FROM wf_claim('claim_checks')$$) AS without_delete;
RESET ROLE;
BEGIN READ ONLY;
SELECT try_sql($$SELECT * FROM wf_claim('claim_checks')$$) AS read_only;
COMMIT;
SELECT status, attempt FROM wf.jobs WHERE queue = 'claim_checks';
SELECT payload FROM wf_claim('claim_checks');
REVOKE ALL ON ALL TABLES IN SCHEMA wf FROM claim_reader;
REVOKE ALL ON SCHEMA wf FROM claim_reader;
DROP ROLE claim_reader;
-- A ready set altered by hand is refused with 55000, never misread.
BEGIN;
ALTER TABLE wf.ready RENAME COLUMN run_at TO due_at;
SELECT try_sql($$SELECT * FROM wf_claim('claim_checks')$$) AS renamed_column;
ROLLBACK;
BEGIN;
DROP INDEX wf.ready_claim_order;
SELECT try_sql($$SELECT * FROM wf_claim('claim_checks')$$) AS without_index;
ROLLBACK;
SELECT wf_enqueue('claim_checks', '{"n": "after"}') IS NOT NULL AS enqueued;
SELECT payload FROM wf_claim('claim_checks');

-- An error inside a claim that waits under max_running (each attempt runs in
-- a subtransaction) aborts the caller's transaction like any error: it rolls
-- back, and the session goes on. Here the queue's lease was set by hand past
-- what a timestamp holds (after wf_configure_queue's invalidation, before
-- this session read the queue's settings again), so the claim's
-- lease_expires_at overflows (22008).
SELECT wf_configure_queue('claim_sub', max_running => 2);
UPDATE wf.queue_config SET lease = '178000000 years' WHERE queue = 'claim_sub';
SELECT wf_enqueue('claim_sub', '{}', max_attempts => 5) IS NOT NULL AS enqueued;
BEGIN;
SELECT try_sql($$SELECT id FROM wf_claim('claim_sub', wait => '1 second')$$) AS claim_error;
SELECT 1 AS still_usable;
ROLLBACK;
\set SHOW_CONTEXT never
BEGIN;
SELECT id FROM wf_claim('claim_sub', wait => '1 second');
ROLLBACK;
\set SHOW_CONTEXT errors
SELECT 1 AS after_rollback;
UPDATE wf.queue_config SET lease = NULL WHERE queue = 'claim_sub';
SELECT wf_configure_queue('claim_sub', max_attempts => 5);
SELECT count(*) AS claimed FROM wf_claim('claim_sub');
