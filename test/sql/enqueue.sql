-- wf_enqueue and wf_enqueue_batch. Queues of this file: enq_*.
-- Job ids are never printed: they come from one sequence shared by the suite.

-- Defaults: only the queue is required.
SELECT wf_enqueue('enq_defaults') AS j \gset
SELECT queue, status, payload, result, attempt, max_attempts, priority,
       run_at <= now() AS due_now, idempotency_key, workflow_id, step_name,
       depends_on, last_error, worker, lease_expires_at, created_at IS NOT NULL AS created,
       started_at, finished_at
  FROM wf.jobs WHERE id = :j;
-- Positional notation works too.
SELECT wf_enqueue('enq_defaults', '{"n": 2}') > :j AS next_id_is_larger;

-- Every argument, in named notation.
SELECT wf_enqueue(queue => 'enq_named',
                  payload => '{"to": "a@b", "n": 1}',
                  run_at => '2000-01-02 03:04:05+00',
                  priority => 7,
                  max_attempts => 3,
                  idempotency_key => 'named-1',
                  workflow_id => '5f0c7a4e-1b2c-4d3e-8f90-0a1b2c3d4e5f',
                  step_name => 'send',
                  depends_on => NULL) AS j \gset
SELECT queue, status, payload, attempt, max_attempts, priority,
       run_at = '2000-01-02 03:04:05+00' AS run_at_kept, idempotency_key,
       workflow_id, step_name, depends_on
  FROM wf.jobs WHERE id = :j;
-- Named arguments in any order; explicit NULLs mean "default".
SELECT wf_enqueue(step_name => 'late', queue => 'enq_named', priority => -1,
                  run_at => NULL, max_attempts => NULL) AS j2 \gset
SELECT status, payload, priority, max_attempts, step_name, run_at <= now() AS due_now
  FROM wf.jobs WHERE id = :j2;
-- Claimed with what the claimer needs; the higher priority first.
SELECT id = :j AS is_j, id = :j2 AS is_j2, attempt, queue, payload, workflow_id, step_name,
       priority, max_attempts, idempotency_key, inputs, lease_expires_at
  FROM wf_claim('enq_named', max_jobs => 10);

-- A job whose run_at is in the future is pending but not claimable.
SELECT wf_enqueue('enq_later', '{"when": "later"}', run_at => now() + interval '1 hour') AS j \gset
SELECT status, run_at > now() AS in_future FROM wf.jobs WHERE id = :j;
SELECT count(*) AS claimed FROM wf_claim('enq_later');
SELECT status, attempt FROM wf.jobs WHERE id = :j;

-- Claim order: higher priority first, then earlier run_at, then lower id.
SELECT wf_enqueue('enq_order', '{"n": "p0 late"}', run_at => '2000-01-01 00:00:01+00') > 0;
SELECT wf_enqueue('enq_order', '{"n": "p0 early"}', run_at => '2000-01-01 00:00:00+00') > 0;
SELECT wf_enqueue('enq_order', '{"n": "p5 first-id"}', priority => 5,
                  run_at => '2000-01-01 00:00:01+00') > 0;
SELECT wf_enqueue('enq_order', '{"n": "p5 second-id"}', priority => 5,
                  run_at => '2000-01-01 00:00:01+00') > 0;
SELECT wf_enqueue('enq_order', '{"n": "p-3 oldest"}', priority => -3,
                  run_at => '1999-01-01 00:00:00+00') > 0;
SELECT wf_enqueue('enq_order', '{"n": "p5 early"}', priority => 5,
                  run_at => '2000-01-01 00:00:00+00') > 0;
-- One job at a time shows the order one claimer sees ...
SELECT payload->>'n' AS job FROM wf_claim('enq_order');
SELECT payload->>'n' AS job FROM wf_claim('enq_order');
-- ... and a claim of several returns them in the same order.
SELECT payload->>'n' AS job, priority FROM wf_claim('enq_order', max_jobs => 10);

-- Idempotency keys: the same key and payload in the same queue returns the
-- existing job and creates nothing.
SELECT wf_enqueue('enq_idem', '{"order": 42}', idempotency_key => 'order-42') AS first \gset
SELECT wf_enqueue('enq_idem', '{"order": 42}', idempotency_key => 'order-42') = :first AS same_id;
-- jsonb equality: key order and whitespace do not matter.
SELECT wf_enqueue('enq_idem', '{ "order" :42 }', idempotency_key => 'order-42') = :first AS same_id;
-- Still the same job after it ran and finished.
SELECT id = :first AS claimed_it, attempt FROM wf_claim('enq_idem');
SELECT wf_complete('enq_idem', :first, 1, '{"ok": true}');
SELECT wf_enqueue('enq_idem', '{"order": 42}', idempotency_key => 'order-42') = :first AS same_id;
SELECT count(*) AS jobs, max(status) AS status FROM wf.jobs WHERE queue = 'enq_idem';
-- A different payload under a used key is an error that names the key.
SELECT try_sql($$SELECT wf_enqueue('enq_idem', '{"order": 43}', idempotency_key => 'order-42')$$);
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'enq_idem';
-- The same key in another queue is another job.
SELECT wf_enqueue('enq_idem_other', '{"order": 43}', idempotency_key => 'order-42') <> :first AS new_job;
-- A new key is a new job.
SELECT wf_enqueue('enq_idem', '{"order": 43}', idempotency_key => 'order-43') <> :first AS new_job;
SELECT idempotency_key, payload, status FROM wf.jobs
 WHERE queue IN ('enq_idem', 'enq_idem_other') ORDER BY queue, idempotency_key;

-- In the caller's transaction: a rollback leaves no job, and frees the key.
BEGIN;
SELECT wf_enqueue('enq_tx', '{"n": 1}', idempotency_key => 'tx-1') IS NOT NULL AS enqueued;
SELECT count(*) AS visible_inside FROM wf.jobs WHERE queue = 'enq_tx';
ROLLBACK;
SELECT count(*) AS after_rollback FROM wf.jobs WHERE queue = 'enq_tx';
SELECT count(*) AS claimable FROM wf_claim('enq_tx');
SELECT wf_enqueue('enq_tx', '{"n": 2}', idempotency_key => 'tx-1') IS NOT NULL AS key_free_again;
SELECT payload FROM wf.jobs WHERE queue = 'enq_tx';
-- A savepoint rolled back takes its jobs with it; the rest commits.
BEGIN;
SELECT wf_enqueue('enq_tx', '{"n": 3}') IS NOT NULL AS kept;
SAVEPOINT s;
SELECT wf_enqueue('enq_tx', '{"n": 4}') IS NOT NULL AS undone;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT payload FROM wf.jobs WHERE queue = 'enq_tx' ORDER BY id;

-- wf_enqueue_batch: one job per element, ids in element order.
SELECT array_agg(id) AS ids FROM wf_enqueue_batch('enq_batch',
       '[{"n": 1}, {"n": 2}, {"n": 3}, "four", 5, null, [6]]') AS id \gset
SELECT cardinality(:'ids'::bigint[]) AS jobs,
       :'ids'::bigint[] = (SELECT array_agg(x ORDER BY x) FROM unnest(:'ids'::bigint[]) x)
           AS ascending;
SELECT ord, j.payload, j.status, j.priority, j.max_attempts, j.attempt
  FROM unnest(:'ids'::bigint[]) WITH ORDINALITY AS u(id, ord)
  JOIN wf.jobs j ON j.queue = 'enq_batch' AND j.id = u.id
 ORDER BY ord;
-- Claimed in batch order (same priority and run_at: by id).
SELECT payload FROM wf_claim('enq_batch', max_jobs => 3);
-- Usable as a set: count and order with ORDINALITY.
SELECT count(*) AS jobs FROM wf_enqueue_batch('enq_batch2',
       (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, 1000) g));
SELECT count(*) AS jobs, min((payload->>'n')::int) AS lo, max((payload->>'n')::int) AS hi
  FROM wf.jobs WHERE queue = 'enq_batch2';
SELECT bool_and((payload->>'n')::int = rn) AS payload_order_is_id_order
  FROM (SELECT payload, row_number() OVER (ORDER BY id) AS rn
          FROM wf.jobs WHERE queue = 'enq_batch2') s;
-- An empty array creates nothing and returns no row.
SELECT * FROM wf_enqueue_batch('enq_batch3', '[]');
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'enq_batch3';
-- Not an array: an error, nothing created.
SELECT try_sql($$SELECT wf_enqueue_batch('enq_batch3', '{"n": 1}')$$);
SELECT try_sql($$SELECT wf_enqueue_batch('enq_batch3', '"text"')$$);
SELECT try_sql($$SELECT wf_enqueue_batch('enq_batch3', '7')$$);
SELECT try_sql($$SELECT wf_enqueue_batch('enq_batch3', 'null')$$);
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'enq_batch3';
-- Batch jobs take the queue's max_attempts, like wf_enqueue.
SELECT wf_configure_queue('enq_batch4', max_attempts => 2);
SELECT wf_enqueue_batch('enq_batch4', '[{}]') IS NOT NULL AS enqueued;
SELECT max_attempts FROM wf.jobs WHERE queue = 'enq_batch4';
-- A batch rolled back leaves nothing.
BEGIN;
SELECT count(*) FROM wf_enqueue_batch('enq_batch5', '[1, 2, 3]');
ROLLBACK;
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'enq_batch5';
