-- The fast paths of a worker: wf_complete_and_claim (complete this job and
-- claim the next in one round trip and one commit) and wf_complete_many
-- (many completions of one queue in one statement).

SELECT count(*) FROM wf_enqueue_batch('cc_q', '[{"n":1},{"n":2},{"n":3}]');
SELECT id AS j1, attempt AS a1 FROM wf_claim('cc_q') \gset

-- Completes job 1, claims job 2.
SELECT completed, payload, attempt FROM wf_complete_and_claim('cc_q', :j1, :a1, '{"r":1}');
SELECT payload->>'n' AS n, status, result FROM wf.jobs WHERE queue = 'cc_q' ORDER BY id;

-- A stale token: completed is false and nothing is stored; the next job is
-- claimed all the same.
SELECT completed, payload FROM wf_complete_and_claim('cc_q', :j1, :a1, '{"r":"again"}');
SELECT result FROM wf.jobs WHERE id = :j1;

-- Nothing left to claim: one row carries `completed`, with NULL job columns.
SELECT id AS j2, attempt AS a2 FROM wf.jobs
 WHERE queue = 'cc_q' AND payload->>'n' = '2' \gset
SELECT completed, id IS NULL AS no_job FROM wf_complete_and_claim('cc_q', :j2, :a2);

-- It releases dependents and its claim obeys max_jobs and the queue's lease.
SELECT wf_enqueue('cc_dep', '{"step":"a"}', step_name => 'a') AS pa \gset
SELECT wf_enqueue('cc_dep', '{"step":"b"}', step_name => 'b', depends_on => ARRAY[:pa]) AS pb \gset
SELECT wf_configure_queue('cc_dep', lease => '1 hour');
SELECT id = :pa AS is_a, attempt FROM wf_claim('cc_dep') \gset
SELECT completed, payload, inputs, lease_expires_at > now() AS leased
  FROM wf_complete_and_claim('cc_dep', :pa, 1, '{"out":"A"}', max_jobs => 5);

-- wf_complete_many: returns the ids it completed, in order; a stale or
-- unknown (id, attempt) is left out.
SELECT count(*) FROM wf_enqueue_batch('cm_q', '[{"n":1},{"n":2},{"n":3},{"n":4}]');
SELECT array_agg(id ORDER BY id) AS ids, array_agg(attempt ORDER BY id) AS atts
  FROM wf_claim('cm_q', max_jobs => 3) \gset
SELECT count(*) AS completed
  FROM wf_complete_many('cm_q', :'ids', :'atts',
                        ARRAY['{"ok":1}', '{"ok":2}', '{"ok":3}']::jsonb[]);
SELECT count(*) AS completed_again FROM wf_complete_many('cm_q', :'ids', :'atts');
SELECT payload->>'n' AS n, status, result FROM wf.jobs WHERE queue = 'cm_q' ORDER BY id;
-- Wrong attempt and unknown id: nothing.
SELECT id AS j4 FROM wf_claim('cm_q') \gset
SELECT count(*) FROM wf_complete_many('cm_q', ARRAY[:j4, -1], ARRAY[2, 1]);
SELECT count(*) FROM wf_complete_many('cm_q', ARRAY[:j4], ARRAY[1]);
-- An empty batch.
SELECT count(*) FROM wf_complete_many('cm_q', '{}', '{}');

-- A child of two parents completed in one call is released once, with
-- both dependencies counted.
SELECT wf_enqueue('cm_dag', '{}', step_name => 'p1') AS p1 \gset
SELECT wf_enqueue('cm_dag', '{}', step_name => 'p2') AS p2 \gset
SELECT wf_enqueue('cm_dag', '{}', step_name => 'child', depends_on => ARRAY[:p1, :p2]) AS c \gset
SELECT array_agg(id) AS ids, array_agg(attempt) AS atts FROM wf_claim('cm_dag', max_jobs => 2) \gset
SELECT count(*) FROM wf_complete_many('cm_dag', :'ids', :'atts');
SELECT step_name, status FROM wf.jobs WHERE queue = 'cm_dag' ORDER BY id;
SELECT step_name, inputs ? 'p1' AND inputs ? 'p2' AS both_inputs FROM wf_claim('cm_dag');

-- Bad input: clear errors, nothing changed.
SELECT try_sql($$SELECT wf_complete_many('cm_q', NULL, '{1}')$$);
SELECT try_sql($$SELECT wf_complete_many('cm_q', '{1}', NULL)$$);
SELECT try_sql($$SELECT wf_complete_many('cm_q', '{1,2}', '{1}')$$);
SELECT try_sql($$SELECT wf_complete_many('cm_q', '{1,NULL}', '{1,1}')$$);
SELECT try_sql($$SELECT wf_complete_many('cm_q', '{1}', '{1}', '{}')$$);
SELECT try_sql($$SELECT wf_complete_many('', '{1}', '{1}')$$);
SELECT try_sql($$SELECT * FROM wf_complete_and_claim(NULL, 1, 1)$$);
SELECT try_sql($$SELECT * FROM wf_complete_and_claim('cc_q', NULL, 1)$$);
SELECT try_sql($$SELECT * FROM wf_complete_and_claim('cc_q', 1, 1, max_jobs => 0)$$);
SELECT status, count(*) FROM wf.jobs WHERE queue LIKE 'cm%' GROUP BY 1 ORDER BY 1;

-- The batch's claims are deleted without the executor (claim_table.cpp),
-- with the executor's checks: a claim table altered by hand is refused
-- with 55000, a read-only transaction with 25006, and nothing changes.
SELECT wf_enqueue('cm_checks', '{}') IS NOT NULL AS enqueued;
SELECT id AS k1, attempt AS k1a FROM wf_claim('cm_checks') \gset
BEGIN;
ALTER TABLE wf.claim DROP CONSTRAINT claim_pkey;
SELECT try_sql(format('SELECT wf_complete_many(%L, ARRAY[%s], ARRAY[%s])', 'cm_checks', :k1, :k1a))
       AS without_key;
ROLLBACK;
-- Job rows are found by id through job_pkey (job_table.cpp): without it,
-- or with job_pkey on other columns, the same refusal.
BEGIN;
ALTER TABLE wf.job DROP CONSTRAINT job_pkey;
SELECT try_sql(format('SELECT wf_complete_many(%L, ARRAY[%s], ARRAY[%s])', 'cm_checks', :k1, :k1a))
       AS without_job_pkey;
ROLLBACK;
BEGIN;
ALTER TABLE wf.job DROP CONSTRAINT job_pkey;
CREATE UNIQUE INDEX job_pkey ON wf.job (attempt, id);
SELECT try_sql(format('SELECT wf_complete_many(%L, ARRAY[%s], ARRAY[%s])', 'cm_checks', :k1, :k1a))
       AS job_pkey_elsewhere;
ROLLBACK;
BEGIN READ ONLY;
SELECT try_sql(format('SELECT wf_complete_many(%L, ARRAY[%s], ARRAY[%s])', 'cm_checks', :k1, :k1a))
       AS read_only;
ROLLBACK;
SELECT status FROM wf.jobs WHERE id = :k1;
SELECT count(*) AS completed FROM wf_complete_many('cm_checks', ARRAY[:k1], ARRAY[:k1a]);
SELECT status, (SELECT count(*) FROM wf.claim WHERE queue = 'cm_checks') AS claims_left
  FROM wf.jobs WHERE id = :k1;
-- Each table privilege is checked on its own (the executor needs all of
-- them): pg_wf's role without DELETE on wf.claim, or without UPDATE on
-- wf.job, completes nothing (42501).
SELECT wf_enqueue('cm_checks', '{}') IS NOT NULL AS enqueued;
SELECT id AS k2, attempt AS k2a FROM wf_claim('cm_checks') \gset
BEGIN;
REVOKE DELETE ON wf.claim FROM wf_owner;
SELECT try_sql(format('SELECT wf_complete_many(%L, ARRAY[%s], ARRAY[%s])', 'cm_checks', :k2, :k2a))
       AS without_delete_on_claim;
ROLLBACK;
BEGIN;
REVOKE UPDATE ON wf.job FROM wf_owner;
SELECT try_sql(format('SELECT wf_complete(%L, %s, %s)', 'cm_checks', :k2, :k2a))
       AS without_update_on_job;
ROLLBACK;
SELECT count(*) AS completed FROM wf_complete_many('cm_checks', ARRAY[:k2], ARRAY[:k2a]);

-- Claims begin attempts without the executor too (claim_rows.cpp), with
-- its checks: a claim table with a column the library does not write is
-- refused with 55000, pg_wf's role without INSERT on wf.claim or SELECT on
-- wf.job claims nothing (42501), and the job stays in the ready set.
SELECT wf_enqueue('cl_checks', '{"n": 1}') AS c1 \gset
BEGIN;
ALTER TABLE wf.claim ADD COLUMN note text NOT NULL DEFAULT 'x';
SELECT try_sql($$SELECT id FROM wf_claim('cl_checks')$$) AS unknown_column;
ROLLBACK;
BEGIN;
REVOKE INSERT ON wf.claim FROM wf_owner;
SELECT try_sql($$SELECT id FROM wf_claim('cl_checks')$$) AS without_insert_on_claim;
ROLLBACK;
BEGIN;
REVOKE SELECT ON wf.job FROM wf_owner;
SELECT try_sql($$SELECT id FROM wf_claim('cl_checks')$$) AS without_select_on_job;
ROLLBACK;
BEGIN READ ONLY;
SELECT try_sql($$SELECT id FROM wf_claim('cl_checks')$$) AS read_only;
ROLLBACK;
SELECT (SELECT count(*) FROM wf.ready WHERE queue = 'cl_checks') AS ready,
       (SELECT count(*) FROM wf.claim WHERE queue = 'cl_checks') AS claims;
-- A claim row an earlier attempt left behind is replaced; one of the
-- attempt the claim would begin (or a later one) is not, and the job is
-- not handed out: an attempt number is one owner's.
INSERT INTO wf.claim (queue, id, attempt, owner_session) VALUES ('cl_checks', :c1, 0, 0);
SELECT id = :c1 AS same_job, attempt, payload, lease_expires_at IS NULL AS no_lease
  FROM wf_claim('cl_checks');
SELECT attempt, owner_pid = pg_backend_pid() AS mine, worker IS NOT NULL AS has_worker
  FROM wf.claim WHERE queue = 'cl_checks';
SELECT wf_complete('cl_checks', :c1, 1) AS completed;
SELECT wf_enqueue('cl_checks', '{"n": 2}') AS c2 \gset
INSERT INTO wf.claim (queue, id, attempt, owner_session) VALUES ('cl_checks', :c2, 1, 0);
SELECT count(*) AS handed_out FROM wf_claim('cl_checks');
SELECT status, (SELECT attempt FROM wf.claim c WHERE c.queue = 'cl_checks' AND c.id = :c2) AS claim_attempt,
       (SELECT count(*) FROM wf.ready WHERE queue = 'cl_checks') AS ready
  FROM wf.jobs WHERE id = :c2;
DELETE FROM wf.claim WHERE queue = 'cl_checks';
-- A lease and a max run time: the lease ends at the earlier of the two.
SELECT wf_enqueue('cl_checks', '{"n": 3}', max_run_time => '10 minutes') AS c3 \gset
SELECT round(extract(epoch FROM lease_expires_at - now())) AS lease_s
  FROM wf_claim('cl_checks', lease => '1 hour');
SELECT round(extract(epoch FROM run_deadline - started_at)) AS run_s, lease,
       round(extract(epoch FROM lease_expires_at - started_at)) AS lease_s
  FROM wf.claim WHERE queue = 'cl_checks';

-- Enqueues insert jobs and ready rows without the executor too
-- (job_inserts.cpp), with its checks: a job table with a column the
-- library does not write is refused with 55000, a NOT NULL added by hand
-- with 23502, pg_wf's role without INSERT on wf.job or wf.ready enqueues
-- nothing (42501), a read-only transaction is refused with 25006; nothing
-- is left behind.
BEGIN;
ALTER TABLE wf.job ADD COLUMN note text NOT NULL DEFAULT 'x';
SELECT try_sql($$SELECT wf_enqueue('in_checks', '{}')$$) AS unknown_column;
SELECT try_sql($$SELECT wf_enqueue_batch('in_checks', '[{}, {}]')$$) AS unknown_column_batch;
ROLLBACK;
BEGIN;
UPDATE wf.job SET worker = 'w' WHERE worker IS NULL;
ALTER TABLE wf.job ALTER COLUMN worker SET NOT NULL;
SELECT try_sql($$SELECT wf_enqueue('in_checks', '{}')$$) AS worker_not_null;
ROLLBACK;
BEGIN;
ALTER TABLE wf.ready ADD COLUMN note text;
SELECT try_sql($$SELECT wf_enqueue_batch('in_checks', '[{}]')$$) AS unknown_ready_column;
ROLLBACK;
BEGIN;
REVOKE INSERT ON wf.job FROM wf_owner;
SELECT try_sql($$SELECT wf_enqueue('in_checks', '{}')$$) AS without_insert_on_job;
ROLLBACK;
BEGIN;
REVOKE INSERT ON wf.ready FROM wf_owner;
SELECT try_sql($$SELECT wf_enqueue_batch('in_checks', '[{}]')$$) AS without_insert_on_ready;
ROLLBACK;
BEGIN READ ONLY;
SELECT try_sql($$SELECT wf_enqueue('in_checks', '{}')$$) AS read_only;
SELECT try_sql($$SELECT wf_enqueue_batch('in_checks', '[{}]')$$) AS read_only_batch;
ROLLBACK;
SELECT (SELECT count(*) FROM wf.job WHERE queue = 'in_checks') AS jobs,
       (SELECT count(*) FROM wf.ready WHERE queue = 'in_checks') AS ready;
-- What the SQL insert set, the rows formed by hand set too: defaults,
-- the job's own run_at and priority in its ready row, keys and versions;
-- a batch longer than one multi-insert (1,000 rows) keeps its order.
BEGIN;
SELECT wf_enqueue('in_checks', '{"a": 1}', priority => 3, run_at => now() + interval '1 hour',
                  key => 'k1', max_run_time => '5 minutes', version => 'v2') AS e1 \gset
SELECT status, attempt, attempt_budget = max_attempts AS budget, created_at = now() AS created_now,
       run_at - now() AS delay, priority, pending_deps, has_dependents, cancel_requested,
       key, max_run_time, finished_at IS NULL AS unfinished, payload
  FROM wf.job WHERE queue = 'in_checks' AND id = :e1;
COMMIT;
SELECT r.priority, r.run_at = j.run_at AS same_run_at, r.key, r.version, j.version AS job_version
  FROM wf.ready r JOIN wf.job j USING (queue, id) WHERE r.queue = 'in_checks' AND r.id = :e1;
SELECT count(*) AS ids, bool_and(id > :e1) AS after,
       count(DISTINCT id) AS distinct_ids
  FROM wf_enqueue_batch('in_checks',
                        (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, 2500) g),
                        (SELECT array_agg(CASE WHEN g % 3 = 0 THEN NULL ELSE 'k' || (g % 7) END)
                           FROM generate_series(1, 2500) g)) AS id;
SELECT count(*) AS jobs, count(r.id) AS ready, count(j.key) AS with_key,
       bool_and(r.key IS NOT DISTINCT FROM j.key) AS ready_keys_match,
       bool_and((j.payload->>'n')::int = j.id - (SELECT min(id) - 1 FROM wf.job
                                                   WHERE queue = 'in_checks' AND id > :e1)) AS in_order,
       bool_and(j.key IS NOT DISTINCT FROM CASE WHEN (j.payload->>'n')::int % 3 = 0 THEN NULL
                                                ELSE 'k' || ((j.payload->>'n')::int % 7) END) AS keys_in_place
  FROM wf.job j LEFT JOIN wf.ready r USING (queue, id)
 WHERE j.queue = 'in_checks' AND j.id > :e1;
-- A blocked job (its dependency runs) gets no ready row; a cancelled one
-- (its dependency failed) is finished at once.
SELECT wf_enqueue('in_deps', '{}') AS d1 \gset
SELECT id FROM wf_claim('in_deps') \gset
SELECT wf_enqueue('in_deps', '{}', depends_on => ARRAY[:d1]) AS d2 \gset
SELECT status, pending_deps, depends_on = ARRAY[:d1]::bigint[] AS depends,
       (SELECT count(*) FROM wf.ready r WHERE r.queue = 'in_deps' AND r.id = j.id) AS ready
  FROM wf.job j WHERE queue = 'in_deps' AND id = :d2;
SELECT wf_fail('in_deps', :d1, 1, 'boom', permanent => true) AS d1_status;
BEGIN;
SELECT wf_enqueue('in_deps', '{}', depends_on => ARRAY[:d1]) AS d3 \gset
SELECT status, last_error = format('dependency job %s failed', :d1) AS error_names_d1,
       cancelled_by = :d1 AS by_d1, finished_at = now() AS finished_now,
       (SELECT count(*) FROM wf.ready r WHERE r.queue = 'in_deps' AND r.id = j.id) AS ready
  FROM wf.job j WHERE queue = 'in_deps' AND id = :d3;
COMMIT;

-- wf_submit inserts its steps by hand too (job and ready rows, the edges;
-- the workflow's row by SQL after them): the same checks, and the same
-- rows as before.
BEGIN;
ALTER TABLE wf.job ADD COLUMN note text;
SELECT try_sql($$SELECT wf_submit('{"name": "in_wf_check", "queue": "in_wf", "steps": [{"name": "a"}]}')$$)
       AS submit_unknown_column;
ROLLBACK;
-- Its edges: wf.dependency altered by hand, or pg_wf's role without INSERT
-- on it, refuse the workflow (55000, 42501) and leave nothing behind.
BEGIN;
ALTER TABLE wf.dependency ADD COLUMN note text;
SELECT try_sql($$SELECT wf_submit('{"name": "in_wf_check", "queue": "in_wf", "steps": [
                    {"name": "a"}, {"name": "b", "after": ["a"]}]}')$$) AS dependency_altered;
ROLLBACK;
BEGIN;
REVOKE INSERT ON wf.dependency FROM wf_owner;
SELECT try_sql($$SELECT wf_submit('{"name": "in_wf_check", "queue": "in_wf", "steps": [
                    {"name": "a"}, {"name": "b", "after": ["a"]}]}')$$) AS without_insert_on_dependency;
ROLLBACK;
BEGIN;
ALTER TABLE wf.dependency ADD CHECK (child_id > 0);
SELECT try_sql($$SELECT wf_submit('{"name": "in_wf_check", "queue": "in_wf", "steps": [
                    {"name": "a"}, {"name": "b", "after": ["a"]}]}')$$) AS dependency_with_check;
ROLLBACK;
SELECT count(*) AS workflows FROM wf.workflow WHERE name = 'in_wf_check';
BEGIN;
SELECT wf_submit('{"name": "in_wf_check", "queue": "in_wf", "steps": [
                    {"name": "a", "payload": {"x": 1}, "priority": 2},
                    {"name": "b", "after": ["a"], "max_attempts": 7, "key": "kb"},
                    {"name": "c", "after": ["a", "b"], "run_at": "2030-01-01T00:00:00Z"}]}') AS w \gset
SELECT step_name, status, payload, priority, max_attempts, attempt_budget, pending_deps,
       has_dependents, key, workflow_id = :'w' AS in_w, cardinality(depends_on) AS deps,
       created_at = now() AS created_now, run_at = now() AS run_now,
       (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id) AS ready
  FROM wf.job j WHERE queue = 'in_wf' ORDER BY id;
SELECT name, steps, child_of FROM wf.workflow WHERE id = :'w';
SELECT p.step_name AS parent, c.step_name AS child, d.child_queue
  FROM wf.dependency d JOIN wf.job c ON c.id = d.child_id JOIN wf.job p ON p.id = d.parent_id
 WHERE c.workflow_id = :'w' ORDER BY 1, 2;
COMMIT;
-- The spec is read from its jsonb as it is: numbers keep their digits into
-- the payload, a spec that is no object and steps that are no array get
-- the errors they got as text.
SELECT wf_submit('{"queue": "in_wf_num", "steps": [{"name": "n", "priority": -3,
                   "payload": {"exact": 0.1000000000000000055511151231257827, "big": 123456789012345678901234567890,
                               "e": 1e3, "s": "é\"\n", "t": true, "z": null, "a": [1, [2, {}]]}}]}') IS NOT NULL AS submitted;
SELECT priority, payload, payload->>'exact' AS exact_digits FROM wf.job WHERE queue = 'in_wf_num';
SELECT try_sql($$SELECT wf_submit('5')$$) AS scalar_spec;
SELECT try_sql($$SELECT wf_submit('{"queue": "q", "steps": {"name": "x"}}')$$) AS steps_no_array;
SELECT try_sql($$SELECT wf_submit('{"queue": "q", "steps": [{"name": "x", "priority": 1.5}]}')$$) AS fraction_priority;
SELECT try_sql($$SELECT wf_submit('{"queue": "q", "steps": [{"name": "x", "priority": 12345678901234567890}]}')$$) AS huge_priority;
-- A step's payload that is an object or an array is copied from the spec's
-- jsonb whole (not read token by token): every shape reaches its job as it
-- was, a "payload" key inside a payload or outside a step is no payload, and
-- a payload over wf.max_payload_size is refused by its jsonb size, as
-- wf_enqueue refuses one.
CREATE TEMP TABLE in_wf_shapes AS SELECT '{"queue": "in_wf_shapes", "steps": [
    {"name": "obj", "payload": {"payload": {"payload": [1, 2.50]}, "k": "v"}},
    {"name": "arr", "payload": [{"a": 1}, [], {}, null, "x"]},
    {"name": "empty_obj", "payload": {}}, {"name": "empty_arr", "payload": []},
    {"name": "str", "payload": "text"}, {"name": "num", "payload": 12.0},
    {"name": "nul", "payload": null}, {"name": "none"},
    {"name": "last", "after": ["obj", "arr"], "payload": {"n": 1}}]}'::jsonb AS spec;
SELECT wf_submit(spec) IS NOT NULL AS submitted FROM in_wf_shapes;
SELECT j.step_name, j.payload, j.payload = coalesce(nullif(step -> 'payload', 'null'), '{}') AS as_given  -- null: absent
  FROM in_wf_shapes, jsonb_array_elements(spec -> 'steps') step
  JOIN wf.job j ON j.queue = 'in_wf_shapes' AND j.step_name = step ->> 'name'
 ORDER BY j.id;
SELECT try_sql($$SELECT wf_submit('{"queue": "q", "payload": {"a": 1}, "steps": [{"name": "x"}]}')$$) AS payload_at_the_top;
SET wf.max_payload_size = 64;
SELECT try_sql($$SELECT wf_submit(jsonb_build_object('queue', 'in_wf_shapes', 'steps',
    jsonb_build_array(jsonb_build_object('name', 'big', 'payload', jsonb_build_object('s', repeat('x', 60))))))$$) AS over_the_limit;
SELECT try_sql($$SELECT wf_enqueue('in_wf_shapes', jsonb_build_object('s', repeat('x', 60)))$$) AS enqueue_over_the_limit;
RESET wf.max_payload_size;
SELECT count(*) AS jobs FROM wf.job WHERE queue = 'in_wf_shapes';
-- Steps added at run time get theirs the same way.
SELECT wf_submit('{"queue": "in_wf_fan", "steps": [{"name": "split"}]}') IS NOT NULL AS submitted;
SELECT wf_complete_with_steps('in_wf_fan', id, attempt, '"split"',
    '[{"name": "p1", "payload": {"part": 1, "of": [1, 2]}}, {"name": "p2", "payload": [2], "after": ["p1"]}]')
  FROM wf_claim('in_wf_fan');
SELECT step_name, payload FROM wf.job WHERE queue = 'in_wf_fan' ORDER BY id;

-- A completion releases its blocked children without the executor too
-- (release_rows.cpp): a child's count goes down by one per finished
-- parent, at zero it is pending (run_at no earlier than now) and in the
-- ready set; pg_wf's role without SELECT on wf.dependency or UPDATE on
-- wf.job releases nothing (42501) and the completion with it.
SELECT wf_enqueue('rl_q', '{}') AS r1, wf_enqueue('rl_q', '{}') AS r2 \gset
SELECT wf_enqueue('rl_child', '{}', depends_on => ARRAY[:r1, :r2]) AS rc,
       wf_enqueue('rl_child', '{}', depends_on => ARRAY[:r1], run_at => now() + interval '1 day') AS rlate,
       wf_enqueue('rl_child', '{}', depends_on => ARRAY[:r2]) AS rsole \gset
SELECT count(*) AS claimed FROM wf_claim('rl_q', max_jobs => 2);
BEGIN;
REVOKE SELECT ON wf.dependency FROM wf_owner;
SELECT try_sql(format('SELECT wf_complete(%L, %s, 1)', 'rl_q', :r1)) AS without_select_on_dependency;
ROLLBACK;
BEGIN;
ALTER TABLE wf.ready ADD COLUMN note text;
SELECT try_sql(format('SELECT wf_complete(%L, %s, 1)', 'rl_q', :r1)) AS ready_altered;
ROLLBACK;
SELECT status FROM wf.job WHERE queue = 'rl_q' AND id = :r1;
SELECT wf_complete('rl_q', :r1, 1) AS completed_r1;
SELECT id = :rc AS is_rc, status, pending_deps, run_at > now() + interval '23 hours' AS kept_late_run_at,
       (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id) AS ready
  FROM wf.job j WHERE queue = 'rl_child' AND id IN (:rc, :rlate) ORDER BY id;
SELECT count(*) AS completed_r2 FROM wf_complete_many('rl_q', ARRAY[:r2], ARRAY[1]);
SELECT status, pending_deps, (SELECT count(*) FROM wf.ready r WHERE r.queue = j.queue AND r.id = j.id) AS ready
  FROM wf.job j WHERE queue = 'rl_child' ORDER BY id;
SELECT count(*) AS debts FROM wf.release_debt;
SELECT count(*) AS claimed_children FROM wf_claim('rl_child', max_jobs => 10);

-- A claim reads the inputs of a job with dependencies by hand too
-- (claim_rows.cpp): each dependency's result under its step name, or its
-- id; JSON null for a NULL result; dependencies in other queues too; none
-- found (retention removed them): NULL, as jsonb_object_agg gave.
SELECT wf_enqueue('in_a', '{}', step_name => 'first') AS ia, wf_enqueue('in_b', '{}') AS ib \gset
SELECT wf_complete(queue, id, attempt, '{"x": [1, "two"]}') AS done_a FROM wf_claim('in_a');
SELECT wf_complete(queue, id, attempt) AS done_b FROM wf_claim('in_b');
SELECT wf_enqueue('in_c', '{}', depends_on => ARRAY[:ia, :ib]) AS ic \gset
SELECT status FROM wf.job WHERE queue = 'in_c';
SELECT inputs = jsonb_build_object('first', '{"x": [1, "two"]}'::jsonb, :'ib', 'null'::jsonb) AS inputs_match
  FROM wf_claim('in_c');
SELECT wf_enqueue('in_d', '{}') AS id1 \gset
SELECT wf_complete(queue, id, attempt) AS done_d FROM wf_claim('in_d');
SELECT wf_enqueue('in_e', '{}', depends_on => ARRAY[:id1]) AS ie \gset
DELETE FROM wf.job WHERE queue = 'in_d';
SELECT id = :ie AS is_e, inputs IS NULL AS no_inputs FROM wf_claim('in_e');
