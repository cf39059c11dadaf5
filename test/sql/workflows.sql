-- wf_submit: a whole workflow (a DAG of named steps) in one call; inputs by
-- step name; wf.workflows and wf_workflow(); a failed step cancels what
-- depends on it (naming the step) while other branches go on, and wf_retry
-- resumes the workflow; wf_cancel_workflow; and every kind of bad spec, each
-- with its SQLSTATE and nothing created. Queues of this file: wfl_*.
-- Ids, uuids and timestamps are never printed.

-- The job id of a step of a workflow.
CREATE FUNCTION wfl_id(w uuid, step text) RETURNS bigint LANGUAGE sql AS
    $$SELECT id FROM wf.job WHERE workflow_id = w AND step_name = step$$;

-- The names of the steps a step runs after, from its depends_on.
CREATE FUNCTION wfl_after(deps bigint[]) RETURNS text LANGUAGE sql AS
    $$SELECT string_agg(p.step_name, ',' ORDER BY p.step_name) FROM wf.job p WHERE p.id = ANY (deps)$$;

-- A message with the job ids of a workflow's steps shown as <step name>.
CREATE FUNCTION wfl_err(msg text, w uuid) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT id, step_name FROM wf.job WHERE workflow_id = w LOOP
        msg := regexp_replace(msg, 'job ' || p.id || '\M', 'job <' || p.step_name || '>', 'g');
    END LOOP;
    RETURN msg;
END
$$;

-- The steps of a workflow, in id order (the order wf_submit inserted them).
CREATE FUNCTION wfl_steps(w uuid)
RETURNS TABLE (step text, queue text, status text, attempt int, max_attempts int,
               after text, last_error text)
LANGUAGE sql AS $$
    SELECT j.step_name, j.queue, j.status, j.attempt, j.max_attempts, wfl_after(j.depends_on),
           wfl_err(j.last_error, w)
      FROM wf.jobs j WHERE j.workflow_id = w ORDER BY j.id
$$;

-- wf.workflows without its timestamps.
CREATE FUNCTION wfl_summary(w uuid)
RETURNS TABLE (name text, status text, steps bigint, blocked bigint, pending bigint,
               running bigint, waiting bigint, done bigint, failed bigint, cancelled bigint,
               started boolean, finished boolean, cancelled_at_set boolean)
LANGUAGE sql AS $$
    SELECT name, status, steps, blocked, pending, running, waiting, done, failed, cancelled,
           started_at IS NOT NULL, finished_at IS NOT NULL, cancelled_at IS NOT NULL
      FROM wf.workflows WHERE workflow_id = w
$$;

-- wf_workflow()'s document with what cannot be printed replaced: a
-- timestamp by true (set) or false (null), the workflow_id by whether it is
-- the one asked for, a step's id by whether it is that step's job.
CREATE FUNCTION wfl_doc_clean(doc jsonb, w uuid) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    out jsonb;
    k text;
    v jsonb;
BEGIN
    IF jsonb_typeof(doc) = 'array' THEN
        SELECT coalesce(jsonb_agg(wfl_doc_clean(e, w) ORDER BY n), '[]')
          INTO out FROM jsonb_array_elements(doc) WITH ORDINALITY AS a(e, n);
        RETURN out;
    END IF;
    IF jsonb_typeof(doc) IS DISTINCT FROM 'object' THEN
        RETURN doc;
    END IF;
    out := '{}';
    FOR k, v IN SELECT * FROM jsonb_each(doc) LOOP
        IF k LIKE '%\_at' OR k IN ('since', 'timeout_at') THEN
            v := to_jsonb(v <> 'null');
        ELSIF k = 'workflow_id' THEN
            v := to_jsonb(v = to_jsonb(w::text));
        ELSIF k = 'id' AND doc ? 'name' THEN
            v := to_jsonb(v = to_jsonb(wfl_id(w, doc->>'name')));
        ELSIF k = 'worker' AND v #>> '{}' ~ '^pid \d+$' THEN
            v := to_jsonb('pid <pid>'::text);
        ELSIF k = 'last_error' AND jsonb_typeof(v) = 'string' THEN
            v := to_jsonb(wfl_err(v #>> '{}', w));
        ELSE
            v := wfl_doc_clean(v, w);
        END IF;
        out := out || jsonb_build_object(k, v);
    END LOOP;
    RETURN out;
END
$$;

-- Everything wf_submit could create: jobs, workflows, dependency edges,
-- ready jobs.
CREATE FUNCTION wfl_counts() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' / ', (SELECT count(*) FROM wf.job), (SELECT count(*) FROM wf.workflow),
                     (SELECT count(*) FROM wf.dependency), (SELECT count(*) FROM wf.ready))
$$;
-- What was added since `before` (a wfl_counts() value).
CREATE FUNCTION wfl_added(before text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s +%s', label, now_n::bigint - then_n::bigint), ', ' ORDER BY n)
      FROM unnest(string_to_array(wfl_counts(), ' / '), string_to_array(before, ' / '),
                  ARRAY['jobs', 'workflows', 'edges', 'ready']) WITH ORDINALITY AS u(now_n, then_n, label, n)
$$;

-- ===== 1. A diamond with fan-in, and an independent step =====
-- fetch -> (parse, thumb) -> publish; audit on its own; archive is listed
-- before the step it runs after.
SELECT wfl_counts() AS before \gset
SELECT wf_submit('{
  "name": "diamond",
  "queue": "wfl",
  "steps": [
    {"name": "archive", "after": ["publish"], "queue": "wfl_slow"},
    {"name": "fetch", "payload": {"url": "https://example.com", "price": 1.50}},
    {"name": "parse", "after": ["fetch"], "priority": 5},
    {"name": "thumb", "queue": "wfl_img", "after": ["fetch", "fetch"], "max_attempts": 2},
    {"name": "publish", "after": ["parse", "thumb"], "payload": [1, "two"]},
    {"name": "audit", "payload": "text", "priority": null, "max_attempts": null}
  ]}') AS w \gset
-- Six jobs, one workflow row, five dependency edges (thumb's duplicate
-- "fetch" counts once), two ready jobs.
SELECT wfl_added(:'before') AS added;
SELECT name, steps FROM wf.workflow WHERE id = :'w';
-- Steps without predecessors are pending at once, the others blocked.
SELECT * FROM wfl_steps(:'w');
SELECT step_name, payload, priority, run_at <= now() AS due, idempotency_key,
       workflow_id = :'w' AS in_workflow
  FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT * FROM wfl_summary(:'w');

-- The two ready steps, claimed together; no inputs, checkpoints or events.
SELECT step_name, attempt, workflow_id = :'w' AS in_workflow, inputs, checkpoints, events
  FROM wf_claim('wfl', worker => 'w1', max_jobs => 10) ORDER BY step_name;
SELECT * FROM wfl_summary(:'w');
SELECT wf_complete('wfl', wfl_id(:'w', 'fetch'), 1, '{"status": 200, "body": "<html>"}');
SELECT wf_complete('wfl', wfl_id(:'w', 'audit'), 1, '"audited"');
-- fetch released both of its children (in two queues); publish waits for both.
SELECT * FROM wfl_steps(:'w');
-- Their inputs: fetch's result keyed by its step name.
SELECT step_name, inputs FROM wf_claim('wfl', max_jobs => 10);
SELECT step_name, inputs FROM wf_claim('wfl_img', max_jobs => 10);
SELECT wf_complete('wfl', wfl_id(:'w', 'parse'), 1, '{"words": 12}');
SELECT step, status FROM wfl_steps(:'w') WHERE step = 'publish';
SELECT count(*) AS claimed FROM wf_claim('wfl', max_jobs => 10);
SELECT wf_complete('wfl_img', wfl_id(:'w', 'thumb'), 1, '["t1.png", "t2.png"]');
-- Fan-in: publish gets both results, by name.
SELECT step_name, payload, inputs FROM wf_claim('wfl', max_jobs => 10);
SELECT * FROM wfl_summary(:'w');
-- wf_workflow, while it runs: one document with a count per status and one
-- entry per step.
SELECT jsonb_pretty(wfl_doc_clean(wf_workflow(:'w'), :'w')) AS workflow;
SELECT wf_complete('wfl', wfl_id(:'w', 'publish'), 1);
SELECT step_name, inputs FROM wf_claim('wfl_slow');
SELECT wf_complete('wfl_slow', wfl_id(:'w', 'archive'), 1, '{"archived": true}');
-- Every step done: the workflow is done, and finished.
SELECT * FROM wfl_summary(:'w');
SELECT finished_at = (SELECT max(finished_at) FROM wf.jobs WHERE workflow_id = :'w') AS finished_last,
       started_at <= (SELECT min(created_at) FROM wf.jobs WHERE workflow_id = :'w') AS started_first
  FROM wf.workflows WHERE workflow_id = :'w';
SELECT jsonb_pretty(wfl_doc_clean(wf_workflow(:'w'), :'w')) AS workflow;
SELECT wf_workflow(:'w')->>'status' AS status, jsonb_typeof(wf_workflow(:'w')->'steps') AS steps_type;

-- ===== 2. Transactions: a rolled back wf_submit leaves nothing =====
SELECT wfl_counts() AS before \gset
BEGIN;
SELECT wf_submit('{"queue": "wfl_tx", "steps": [{"name": "a"}, {"name": "b", "after": ["a"]}]}') IS NOT NULL AS submitted;
SELECT count(*) AS visible_inside FROM wf.jobs WHERE queue = 'wfl_tx';
ROLLBACK;
SELECT wfl_counts() = :'before' AS nothing_left;
-- Two submits of the same spec are two workflows.
SELECT wf_submit('{"queue": "wfl_tx", "steps": [{"name": "a"}]}') AS w1 \gset
SELECT wf_submit('{"queue": "wfl_tx", "steps": [{"name": "a"}]}') AS w2 \gset
SELECT :'w1' <> :'w2' AS distinct_ids, count(*) AS jobs FROM wf.jobs WHERE queue = 'wfl_tx';
-- A workflow without a name; a step with a run_at in the future is pending
-- but not ready, and its dependent waits for it.
SELECT wf_submit('{"queue": "wfl_later", "steps": [
  {"name": "later", "run_at": "2999-01-01T00:00:00Z"},
  {"name": "after_later", "after": ["later"]}]}') AS w \gset
SELECT name IS NULL AS unnamed, status, pending, blocked FROM wf.workflows WHERE workflow_id = :'w';
SELECT step_name, status, run_at = '2999-01-01T00:00:00Z'::timestamptz AS run_at_kept
  FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT count(*) AS claimed FROM wf_claim('wfl_later', max_jobs => 10);
SELECT wf_cancel_workflow(:'w') AS cancelled;

-- ===== 3. A step that fails for good cancels its dependents, naming it =====
-- fetch -> parse -> store -> join <- side <- (none); side -> report.
-- fetch fails permanently: parse, store and join are cancelled; side and
-- report go on.
SELECT wf_submit('{
  "name": "etl",
  "queue": "wfl_fail",
  "steps": [
    {"name": "fetch", "max_attempts": 3},
    {"name": "parse", "after": ["fetch"]},
    {"name": "store", "after": ["parse"]},
    {"name": "side"},
    {"name": "report", "after": ["side"], "queue": "wfl_fail_other"},
    {"name": "join", "after": ["store", "side"]}
  ]}') AS w \gset
SELECT step_name FROM wf_claim('wfl_fail', max_jobs => 10) ORDER BY 1;
-- A failure with attempts left retries and cancels nothing.
SELECT wf_fail('wfl_fail', wfl_id(:'w', 'fetch'), 1, 'timeout', retry_in => '0 seconds') AS status;
SELECT * FROM wfl_steps(:'w');
SELECT step_name, attempt FROM wf_claim('wfl_fail', max_jobs => 10);
SELECT wf_fail('wfl_fail', wfl_id(:'w', 'fetch'), 2, 'HTTP 404', permanent => true) AS status;
-- The failed step's dependents, transitively, are cancelled and say which
-- step failed (ids shown as <step>); side and report are untouched.
SELECT * FROM wfl_steps(:'w');
SELECT step_name, finished_at IS NOT NULL AS finished FROM wf.jobs
 WHERE workflow_id = :'w' AND status = 'cancelled' ORDER BY id;
-- The other branch goes on.
SELECT * FROM wfl_summary(:'w');
SELECT wf_complete('wfl_fail', wfl_id(:'w', 'side'), 1, '{"side": 1}');
SELECT step_name, inputs FROM wf_claim('wfl_fail_other');
SELECT wf_complete('wfl_fail_other', wfl_id(:'w', 'report'), 1, '{"report": 1}');
SELECT count(*) AS claimable FROM wf_claim('wfl_fail', max_jobs => 10);
-- Nothing runs any more; a step failed: the workflow failed.
SELECT * FROM wfl_summary(:'w');
SELECT wf_workflow(:'w')->>'status' AS status;

-- wf_retry of the failed step resumes the workflow: the step runs again,
-- the steps its failure cancelled wait on it again, and the finished steps
-- (side, report) are not run again.
SELECT wf_retry('wfl_fail', wfl_id(:'w', 'fetch')) AS retried;
SELECT * FROM wfl_steps(:'w');
SELECT * FROM wfl_summary(:'w');
SELECT step_name, attempt, checkpoints FROM wf_claim('wfl_fail', max_jobs => 10);
SELECT wf_complete('wfl_fail', wfl_id(:'w', 'fetch'), 3, '{"fetched": true}');
SELECT step_name, inputs FROM wf_claim('wfl_fail', max_jobs => 10);
SELECT wf_complete('wfl_fail', wfl_id(:'w', 'parse'), 1, '{"parsed": true}');
SELECT step_name, inputs FROM wf_claim('wfl_fail', max_jobs => 10);
SELECT wf_complete('wfl_fail', wfl_id(:'w', 'store'), 1, '{"stored": true}');
-- join gets the result of side from its first (and only) run.
SELECT step_name, inputs FROM wf_claim('wfl_fail', max_jobs => 10);
SELECT wf_complete('wfl_fail', wfl_id(:'w', 'join'), 1);
SELECT * FROM wfl_steps(:'w');
SELECT * FROM wfl_summary(:'w');

-- Attempts exhausted (max_attempts 1) propagate the same way; a step that
-- is not in a workflow keeps the old message.
SELECT wf_submit('{"queue": "wfl_exhaust", "steps": [
  {"name": "only_once", "max_attempts": 1},
  {"name": "child", "after": ["only_once"]},
  {"name": "grandchild", "after": ["child"]}]}') AS w \gset
SELECT count(*) FROM wf_claim('wfl_exhaust');
SELECT wf_fail('wfl_exhaust', wfl_id(:'w', 'only_once'), 1, 'boom') AS status;
SELECT * FROM wfl_steps(:'w');
SELECT wf_enqueue('wfl_plain', '{}', max_attempts => 1) AS p \gset
SELECT wf_enqueue('wfl_plain', '{}', depends_on => ARRAY[:p]) AS c \gset
SELECT count(*) FROM wf_claim('wfl_plain');
SELECT wf_fail('wfl_plain', :p, 1, 'boom') AS status;
SELECT status, replace(last_error, :'p', '<p>') AS last_error FROM wf.jobs WHERE id = :c;

-- Steps that failed in two branches: a join after both is cancelled once.
SELECT wf_submit('{"queue": "wfl_two", "steps": [
  {"name": "l", "max_attempts": 1}, {"name": "r", "max_attempts": 1},
  {"name": "j", "after": ["l", "r"]}]}') AS w \gset
SELECT count(*) FROM wf_claim('wfl_two', max_jobs => 2);
SELECT wf_fail('wfl_two', wfl_id(:'w', 'l'), 1, 'left broke') AS l,
       wf_fail('wfl_two', wfl_id(:'w', 'r'), 1, 'right broke') AS r;
SELECT * FROM wfl_steps(:'w');
SELECT * FROM wfl_summary(:'w');

-- ===== 4. wf_cancel_workflow =====
-- One step of each kind: done, running, pending, blocked (and a blocked
-- one two levels down).
SELECT wf_submit('{"name": "to-cancel", "queue": "wfl_cancel", "steps": [
  {"name": "first"},
  {"name": "second", "after": ["first"]},
  {"name": "other", "queue": "wfl_cancel_other"},
  {"name": "third", "after": ["second"]},
  {"name": "fourth", "after": ["third", "other"]}]}') AS w \gset
SELECT step_name FROM wf_claim('wfl_cancel');
SELECT wf_complete('wfl_cancel', wfl_id(:'w', 'first'), 1, '"one"');
SELECT step_name FROM wf_claim('wfl_cancel');
SELECT * FROM wfl_steps(:'w');
-- Cancels other (pending), third and fourth (blocked); flags second (running):
-- four in all.
SELECT wf_cancel_workflow(:'w') AS cancelled;
SELECT step_name, status, cancel_requested FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT * FROM wfl_summary(:'w');
SELECT count(*) AS claimable FROM wf_claim('wfl_cancel_other');
-- The running step learns it: heartbeat false, complete false, and it ends
-- cancelled without a result; its dependents stay cancelled.
SELECT wf_heartbeat('wfl_cancel', wfl_id(:'w', 'second'), 1) AS still_mine;
SELECT wf_complete('wfl_cancel', wfl_id(:'w', 'second'), 1, '"two"') AS completed;
SELECT step_name, status, result FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT * FROM wfl_summary(:'w');
-- A second cancel finds nothing left to cancel.
SELECT wf_cancel_workflow(:'w') AS cancelled;
-- A finished workflow: nothing to cancel, and it stays done.
SELECT wf_submit('{"queue": "wfl_cancel_done", "steps": [{"name": "s"}]}') AS w2 \gset
SELECT wf_complete(queue, id, attempt) FROM wf_claim('wfl_cancel_done');
SELECT wf_cancel_workflow(:'w2') AS cancelled;
SELECT status, done FROM wf.workflows WHERE workflow_id = :'w2';
-- A running step whose worker fails it after the cancel: it ends cancelled.
SELECT wf_submit('{"queue": "wfl_cancel_fail", "steps": [{"name": "s"}, {"name": "t", "after": ["s"]}]}') AS w3 \gset
SELECT count(*) FROM wf_claim('wfl_cancel_fail');
SELECT wf_cancel_workflow(:'w3') AS cancelled;
SELECT wf_fail('wfl_cancel_fail', wfl_id(:'w3', 's'), 1, 'gave up') AS status;
SELECT step_name, status FROM wf.jobs WHERE workflow_id = :'w3' ORDER BY id;
-- Cancelling rolls back with its transaction.
SELECT wf_submit('{"queue": "wfl_cancel_tx", "steps": [{"name": "s"}]}') AS w4 \gset
BEGIN;
SELECT wf_cancel_workflow(:'w4') AS cancelled;
ROLLBACK;
SELECT status FROM wf.jobs WHERE workflow_id = :'w4';
SELECT cancelled_at IS NULL AS not_cancelled FROM wf.workflows WHERE workflow_id = :'w4';
-- A pending step is not retried; once wf_cancel_workflow has cancelled it,
-- wf_retry runs it again.
SELECT wf_retry('wfl_cancel_tx', wfl_id(:'w4', 's')) AS retried;
SELECT wf_cancel_workflow(:'w4') AS cancelled;
SELECT wf_retry('wfl_cancel_tx', wfl_id(:'w4', 's')) AS retried;
SELECT status, attempt FROM wf.jobs WHERE workflow_id = :'w4';
SELECT step_name, attempt FROM wf_claim('wfl_cancel_tx');
SELECT wf_complete('wfl_cancel_tx', wfl_id(:'w4', 's'), 1) AS completed;
SELECT status, cancelled_at_set FROM wfl_summary(:'w4');

-- Jobs put in a workflow by wf_enqueue(workflow_id => ...) are a workflow
-- too (without a name).
SELECT wf_enqueue('wfl_manual', '{}', workflow_id => '00000000-0000-4000-8000-00000000000a',
                  step_name => 'm1') AS m1 \gset
SELECT wf_enqueue('wfl_manual', '{}', workflow_id => '00000000-0000-4000-8000-00000000000a',
                  step_name => 'm2', depends_on => ARRAY[:m1]) AS m2 \gset
SELECT * FROM wfl_summary('00000000-0000-4000-8000-00000000000a');
SELECT wf_workflow('00000000-0000-4000-8000-00000000000a')->>'status' AS status;
SELECT wf_cancel_workflow('00000000-0000-4000-8000-00000000000a') AS cancelled;
SELECT * FROM wfl_summary('00000000-0000-4000-8000-00000000000a');

-- ===== 5. Bad specs: each one an error with its SQLSTATE; nothing created =====
-- Runs wf_submit on each spec: the error ('SQLSTATE: message'), and whether
-- nothing at all was created.
CREATE FUNCTION wfl_bad(specs text[])
RETURNS TABLE (n int, error text, nothing_created boolean) LANGUAGE plpgsql AS $$
DECLARE
    spec text;
    before text;
BEGIN
    n := 0;
    FOREACH spec IN ARRAY specs LOOP
        n := n + 1;
        before := wfl_counts();
        error := try_sql(format('SELECT wf_submit(%L::jsonb)', spec));
        nothing_created := wfl_counts() = before;
        RETURN NEXT;
    END LOOP;
END
$$;

SELECT wfl_counts() AS before \gset
-- The shape of the document.
SELECT * FROM wfl_bad(ARRAY[
  '[]',
  '"steps"',
  '42',
  'null',
  '{}',
  '{"queue": "wfl_bad"}',
  '{"queue": "wfl_bad", "steps": []}',
  '{"queue": "wfl_bad", "steps": null}',
  '{"queue": "wfl_bad", "steps": {"a": {}}}',
  '{"queue": "wfl_bad", "steps": "a"}',
  '{"queue": "wfl_bad", "steps": [{"name": "a"}, "b"]}',
  '{"queue": "wfl_bad", "steps": [[]]}',
  '{"queue": "wfl_bad", "stepz": [], "steps": [{"name": "a"}]}',
  '{"queue": "wfl_bad", "name": 5, "steps": [{"name": "a"}]}',
  '{"queue": "wfl_bad", "name": "", "steps": [{"name": "a"}]}',
  '{"queue": 5, "steps": [{"name": "a"}]}',
  '{"queue": "", "steps": [{"name": "a"}]}'
]);
-- Names: missing, wrong type, empty, duplicate; unknown keys (a typo must
-- not drop a dependency silently).
SELECT * FROM wfl_bad(ARRAY[
  '{"queue": "wfl_bad", "steps": [{"name": "a"}, {"payload": {}}]}',
  '{"queue": "wfl_bad", "steps": [{"name": null}]}',
  '{"queue": "wfl_bad", "steps": [{"name": 7}]}',
  '{"queue": "wfl_bad", "steps": [{"name": ["a"]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a"}, {"name": ""}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "fetch"}, {"name": "b"}, {"name": "fetch"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "x", "afterr": ["y"]}]}',
  '{"queue": "wfl_bad", "steps": [{"nmae": "x"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "x", "idempotency_key": "k"}]}'
]);
-- Queues: none for a step, or a bad one.
SELECT * FROM wfl_bad(ARRAY[
  '{"steps": [{"name": "a"}]}',
  '{"steps": [{"name": "a", "queue": "wfl_bad"}, {"name": "b"}]}',
  '{"queue": null, "steps": [{"name": "a"}]}',
  '{"steps": [{"name": "a", "queue": ""}]}',
  '{"steps": [{"name": "a", "queue": 1}]}',
  '{"steps": [{"name": "a", "queue": "bad\nqueue"}]}',
  format('{"steps": [{"name": "a", "queue": "%s"}]}', repeat('q', 129)),
  format('{"queue": "%s", "steps": [{"name": "a"}]}', repeat('q', 129))
]);
-- Types and values of the other step keys.
SELECT * FROM wfl_bad(ARRAY[
  '{"queue": "wfl_bad", "steps": [{"name": "a", "priority": "high"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "priority": 1.5}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "priority": 2147483648}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "max_attempts": 0}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "max_attempts": -1}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "max_attempts": "3"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "run_at": 5}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "run_at": ""}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "run_at": "not a time"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a"}, {"name": "b", "run_at": "2026-02-30T10:00:00Z"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": "b"}, {"name": "b"}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": [1]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": {"b": 1}}]}'
]);
-- The graph: unknown predecessor, a step after itself, cycles.
SELECT * FROM wfl_bad(ARRAY[
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": ["nope"]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": ["A"]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a"}, {"name": "b", "after": ["a", "b"]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "a", "after": ["b"]}, {"name": "b", "after": ["a"]}]}',
  '{"queue": "wfl_bad", "steps": [{"name": "root"}, {"name": "x", "after": ["root", "z"]}, {"name": "y", "after": ["x"]}, {"name": "z", "after": ["y"]}]}'
]);
-- Limits: a payload over wf.max_payload_size, more than 100000 steps, a
-- name over 256 bytes (54000).
SET wf.max_payload_size = '1kB';
SELECT * FROM wfl_bad(ARRAY[
  format('{"queue": "wfl_bad", "steps": [{"name": "small"}, {"name": "big", "payload": {"x": "%s"}}]}', repeat('x', 2000)),
  format('{"queue": "wfl_bad", "steps": [{"name": "%s"}]}', repeat('n', 257))
]);
RESET wf.max_payload_size;
SELECT wfl_counts() AS before_many \gset
SELECT try_sql($$SELECT wf_submit(jsonb_build_object('queue', 'wfl_bad', 'steps',
    (SELECT jsonb_agg(jsonb_build_object('name', 's' || g)) FROM generate_series(1, 100001) g)))$$);
SELECT wfl_counts() = :'before_many' AS nothing_created;
-- The details and hints of a few.
SELECT try_sql($$SELECT wf_submit('{"queue": "wfl_bad", "steps": [{"name": "x", "afterr": ["y"]}]}')$$, true);
SELECT try_sql($$SELECT wf_submit('{"queue": "wfl_bad", "steps": [{"name": "a", "after": ["b"]}, {"name": "b", "after": ["a"]}]}')$$, true);
SELECT try_sql($$SELECT wf_submit('{"steps": [{"name": "a"}]}')$$, true);
-- Bad arguments: NULL spec, workflow id NULL or unknown.
SELECT try_sql($$SELECT wf_submit(NULL)$$);
SELECT try_sql($$SELECT wf_workflow(NULL)$$);
SELECT try_sql($$SELECT wf_cancel_workflow(NULL)$$);
SELECT try_sql($$SELECT wf_workflow('00000000-0000-0000-0000-000000000000')$$);
SELECT try_sql($$SELECT wf_cancel_workflow('00000000-0000-0000-0000-000000000000')$$);
-- None of it created anything.
SELECT wfl_counts() = :'before' AS nothing_created;
SELECT count(*) AS jobs FROM wf.jobs WHERE queue LIKE 'wfl\_bad%';

-- A spec at the edge of the rules is fine: names are case-sensitive, JSON
-- null is an absent key, a step may be listed before its predecessors.
SELECT wf_submit('{"queue": "wfl_edge", "name": null, "steps": [
  {"name": "Fetch", "after": ["fetch"], "payload": null, "run_at": null, "priority": null},
  {"name": "fetch"}]}') AS w \gset
SELECT * FROM wfl_steps(:'w');
