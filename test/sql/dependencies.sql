-- depends_on: blocked jobs, release when every parent is done, inputs from
-- the parents' results, cancellation when a parent fails, and wf_retry
-- bringing a failed branch back. Queues of this file: dep_*.
-- Ids in messages are printed as <name> (ids depend on the whole suite).

-- A diamond: extract -> (resize, 'thumb' by id) -> publish.
SELECT wf_enqueue('dep', '{"n": "extract"}', step_name => 'extract') AS a \gset
SELECT wf_enqueue('dep', '{"n": "resize"}', step_name => 'resize', depends_on => ARRAY[:a]) AS b \gset
SELECT wf_enqueue('dep', '{"n": "thumb"}', depends_on => ARRAY[:a]) AS c \gset
SELECT wf_enqueue('dep', '{"n": "publish"}', step_name => 'publish',
                  depends_on => ARRAY[:b, :c, :b]) AS d \gset
SELECT payload->>'n' AS job, status, depends_on = ARRAY[:a]::bigint[] AS on_a,
       depends_on = ARRAY[:b, :c]::bigint[] AS on_b_c
  FROM wf.jobs WHERE queue = 'dep' ORDER BY id;
-- Only the root is ready.
SELECT payload->>'n' AS job, inputs FROM wf_claim('dep', max_jobs => 10);
SELECT wf_complete('dep', :a, 1, '{"pages": 3}');
-- Both children of the root are released at once.
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'dep' ORDER BY id;
-- Their inputs: the root's result, keyed by its step name.
SELECT payload->>'n' AS job, inputs FROM wf_claim('dep', max_jobs => 10);
-- One parent of publish done: still blocked.
SELECT wf_complete('dep', :b, 1, '{"size": "small"}');
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE id = :d;
SELECT count(*) AS claimed FROM wf_claim('dep', max_jobs => 10);
-- The last one releases it.
SELECT wf_complete('dep', :c, 1, '[1, 2]');
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE id = :d;
-- Parents without a step name are keyed by id.
SELECT payload->>'n' AS job, inputs->'resize' AS resize, inputs->:'c' AS by_id,
       (SELECT count(*) FROM jsonb_object_keys(inputs)) AS keys
  FROM wf_claim('dep', max_jobs => 10);
SELECT wf_complete('dep', :d, 1);
SELECT payload->>'n' AS job, status, result FROM wf.jobs WHERE queue = 'dep' ORDER BY id;

-- A parent that is already done does not block; its result is an input.
SELECT wf_enqueue('dep_done', '{"n": "child"}', depends_on => ARRAY[:a]) AS j \gset
SELECT status FROM wf.jobs WHERE id = :j;
SELECT inputs FROM wf_claim('dep_done');
-- A parent done with no result gives a JSON null input.
SELECT wf_enqueue('dep_done', '{"n": "parent"}', step_name => 'p') AS p \gset
SELECT count(*) FROM wf_claim('dep_done');
SELECT wf_complete('dep_done', :p, 1);
SELECT wf_enqueue('dep_done', '{"n": "child2"}', depends_on => ARRAY[:p]) AS j \gset
SELECT inputs FROM wf_claim('dep_done');

-- Dependencies cross queues: a job of one queue releases a job of another.
SELECT wf_enqueue('dep_x1', '{}', step_name => 'upstream') AS p \gset
SELECT wf_enqueue('dep_x2', '{}', depends_on => ARRAY[:p]) AS j \gset
SELECT status FROM wf.jobs WHERE id = :j;
SELECT count(*) FROM wf_claim('dep_x1');
SELECT wf_complete('dep_x1', :p, 1, '{"from": "x1"}');
SELECT status FROM wf.jobs WHERE id = :j;
SELECT inputs FROM wf_claim('dep_x2');

-- Parent and child in one transaction; rolled back, neither exists.
BEGIN;
SELECT wf_enqueue('dep_tx') AS p \gset
SELECT wf_enqueue('dep_tx', depends_on => ARRAY[:p]) IS NOT NULL AS child;
ROLLBACK;
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'dep_tx';

-- A dependency on a job that does not exist: an error, nothing created.
SELECT try_sql($$SELECT wf_enqueue('dep_missing', depends_on => ARRAY[9000000000000])$$);
SELECT try_sql(format($$SELECT wf_enqueue('dep_missing', depends_on => ARRAY[%s, 9000000000000])$$, :a));
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'dep_missing';
-- An empty array is no dependency.
SELECT wf_enqueue('dep_missing', depends_on => '{}') AS j \gset
SELECT status FROM wf.jobs WHERE id = :j;

-- A parent that fails cancels its dependents, transitively, saying why.
SELECT wf_enqueue('dep_fail', '{"n": "root"}', max_attempts => 1, step_name => 'root') AS r \gset
SELECT wf_enqueue('dep_fail', '{"n": "other"}', step_name => 'other') AS o \gset
SELECT wf_enqueue('dep_fail', '{"n": "child"}', step_name => 'child',
                  depends_on => ARRAY[:r, :o]) AS c \gset
SELECT wf_enqueue('dep_fail', '{"n": "grandchild"}', depends_on => ARRAY[:c]) AS g \gset
SELECT wf_enqueue('dep_fail_other', '{"n": "cousin"}', depends_on => ARRAY[:g]) AS k \gset
SELECT payload->>'n' AS job FROM wf_claim('dep_fail', max_jobs => 10);
SELECT wf_complete('dep_fail', :o, 1, '{"other": 1}');
SELECT wf_fail('dep_fail', :r, 1, 'disk full') AS status;
SELECT payload->>'n' AS job, status, replace(last_error, :'r', '<root>') AS last_error,
       finished_at IS NOT NULL AS finished
  FROM wf.jobs WHERE queue IN ('dep_fail', 'dep_fail_other') ORDER BY id;
SELECT count(*) AS claimed FROM wf_claim('dep_fail', max_jobs => 10);
-- A new job depending on a failed job is cancelled at once.
SELECT wf_enqueue('dep_fail', '{"n": "late"}', depends_on => ARRAY[:r]) AS late \gset
SELECT status, replace(last_error, :'r', '<root>') AS last_error FROM wf.jobs WHERE id = :late;

-- wf_retry on the failed parent brings it back, and with it every job its
-- failure cancelled, blocked on it again.
SELECT wf_retry('dep_fail', :r) AS retried;
SELECT payload->>'n' AS job, status, attempt, max_attempts
  FROM wf.jobs WHERE queue IN ('dep_fail', 'dep_fail_other') ORDER BY id;
-- Run the branch to its end: each completion releases the next job, and
-- the inputs are those of the successful run.
SELECT payload->>'n' AS job, attempt FROM wf_claim('dep_fail', max_jobs => 10);
SELECT wf_complete('dep_fail', :r, 2, '{"root": "ok"}');
SELECT payload->>'n' AS job, inputs FROM wf_claim('dep_fail', max_jobs => 10) ORDER BY 1;
SELECT wf_complete('dep_fail', :c, 1, '{"child": "ok"}');
SELECT wf_complete('dep_fail', :late, 1);
SELECT payload->>'n' AS job, inputs FROM wf_claim('dep_fail', max_jobs => 10);
SELECT wf_complete('dep_fail', :g, 1, '{"grandchild": "ok"}');
SELECT payload->>'n' AS job, inputs->:'g' AS from_grandchild FROM wf_claim('dep_fail_other');
SELECT wf_complete('dep_fail_other', :k, 1);
SELECT payload->>'n' AS job, status, replace(last_error, :'r', '<root>') AS last_error
  FROM wf.jobs WHERE queue IN ('dep_fail', 'dep_fail_other') ORDER BY id;

-- Exhausting attempts also cancels dependents; a retry on the child alone
-- (its parent still failed) is refused (55000, naming the parent) and
-- changes nothing: it would wait for a job that never runs again.
SELECT wf_enqueue('dep_exhaust', '{"n": "parent"}', max_attempts => 1) AS p \gset
SELECT wf_enqueue('dep_exhaust', '{"n": "child"}', depends_on => ARRAY[:p]) AS c \gset
SELECT count(*) FROM wf_claim('dep_exhaust');
SELECT wf_fail('dep_exhaust', :p, 1, 'boom') AS status;
SELECT payload->>'n' AS job, status, replace(last_error, :'p', '<parent>') AS last_error
  FROM wf.jobs WHERE queue = 'dep_exhaust' ORDER BY id;
SELECT replace(replace(try_sql('SELECT wf_retry(''dep_exhaust'', ' || :c || ')', with_detail => true),
                       :'p', '<parent>'), :'c', '<child>') AS retried;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'dep_exhaust' ORDER BY id;
SELECT count(*) AS claimed FROM wf_claim('dep_exhaust');
-- Retrying the parent later releases it as usual.
SELECT wf_retry('dep_exhaust', :p) AS retried;
SELECT payload->>'n' AS job, attempt FROM wf_claim('dep_exhaust');
SELECT wf_complete('dep_exhaust', :p, 2, '"parent ok"');
SELECT payload->>'n' AS job, inputs->:'p' AS from_parent FROM wf_claim('dep_exhaust');

-- Releases left to the background worker (wf.release_debt) and wf_retry.
-- A completion that found the child held by a sibling's completion leaves
-- a debt instead of decrementing; simulated here: p1 is done, its release
-- of the child is a debt, so the child still counts 2 unfinished parents.
SELECT wf_enqueue('dep_debt', '{"n": "p1"}') AS p1 \gset
SELECT wf_enqueue('dep_debt', '{"n": "p2"}', max_attempts => 1) AS p2 \gset
SELECT wf_enqueue('dep_debt', '{"n": "child"}', depends_on => ARRAY[:p1, :p2]) AS c \gset
SELECT count(*) FROM wf_claim('dep_debt', max_jobs => 2);
SELECT wf_complete('dep_debt', :p1, 1);
UPDATE wf.job SET pending_deps = 2 WHERE queue = 'dep_debt' AND id = :c;
INSERT INTO wf.release_debt VALUES ('dep_debt', :c, :p1);
-- p2 fails for good before the worker paid the debt: the child is cancelled.
SELECT wf_fail('dep_debt', :p2, 1, 'boom') AS status;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'dep_debt' ORDER BY id;
-- Retrying p2 restores the child and recounts its parents (p1 done: one
-- left). The recount pays p1's debt in the same statement, so the worker
-- cannot apply it a second time and release the child before p2 is done.
SELECT wf_retry('dep_debt', :p2) AS retried;
SELECT count(*) AS debts_left FROM wf.release_debt WHERE child_id = :c;
SELECT wf_sweep() >= 0 AS swept;
SELECT payload->>'n' AS job, status, pending_deps FROM wf.job WHERE queue = 'dep_debt' ORDER BY id;
-- p2 runs again and completes: now the child is ready.
SELECT payload->>'n' AS job, attempt FROM wf_claim('dep_debt');
SELECT wf_complete('dep_debt', :p2, 2);
SELECT payload->>'n' AS job, status, pending_deps FROM wf.job WHERE queue = 'dep_debt' ORDER BY id;
-- A debt the worker pays: the sweep applies it like a completion would.
SELECT wf_enqueue('dep_debt2', '{"n": "parent"}') AS q1 \gset
SELECT wf_enqueue('dep_debt2', '{"n": "child"}', depends_on => ARRAY[:q1]) AS qc \gset
SELECT count(*) FROM wf_claim('dep_debt2');
SELECT wf_complete('dep_debt2', :q1, 1);
UPDATE wf.job SET status = 'blocked', pending_deps = 1 WHERE queue = 'dep_debt2' AND id = :qc;
DELETE FROM wf.ready WHERE queue = 'dep_debt2';
INSERT INTO wf.release_debt VALUES ('dep_debt2', :qc, :q1);
SELECT wf_sweep() >= 0 AS swept;
SELECT count(*) AS debts_left FROM wf.release_debt;
SELECT payload->>'n' AS job, status, pending_deps FROM wf.job WHERE queue = 'dep_debt2' ORDER BY id;
SELECT payload->>'n' AS job, inputs->:'q1' IS NOT NULL AS has_input FROM wf_claim('dep_debt2');

-- A job cancelled by one failed parent, while its other parent failed too:
-- retrying the first parent leaves it cancelled -- by the second, whose
-- retry brings it back -- never blocked on a job that does not run again.
SELECT wf_enqueue('dep_two', '{"n": "a"}') AS a \gset
SELECT wf_enqueue('dep_two', '{"n": "b"}') AS b \gset
SELECT wf_enqueue('dep_two', '{"n": "c"}', depends_on => ARRAY[:a, :b]::bigint[]) AS c \gset
SELECT count(*) AS claimed FROM wf_claim('dep_two', max_jobs => 2);
SELECT wf_fail('dep_two', :a, 1, 'x', permanent => true) AS a_status;
SELECT wf_fail('dep_two', :b, 1, 'x', permanent => true) AS b_status;
SELECT wf_retry('dep_two', :a) AS retried_a;
SELECT payload->>'n' AS job, status,
       replace(replace(last_error, :'a', '<a>'), :'b', '<b>') AS last_error
  FROM wf.jobs WHERE queue = 'dep_two' ORDER BY id;
SELECT wf_retry('dep_two', :b) AS retried_b;
SELECT payload->>'n' AS job, status FROM wf.jobs WHERE queue = 'dep_two' ORDER BY id;
SELECT wf_complete('dep_two', id, attempt) FROM wf_claim('dep_two', max_jobs => 2);
SELECT payload->>'n' AS job FROM wf_claim('dep_two');
