-- Workflows 2 (schema 1.6): child workflows (wf_start_child,
-- wf_await_children, outcomes delivered as "wf:child:<name>", cancels that
-- reach children and grandchildren), versions (wf_enqueue, wf_submit, the
-- queue default, claims with versions, wf.version_stats), result waits
-- (wf_wait_job, wf_wait_workflow), signal-with-start and workflow keys,
-- run-time fan-out (wf_complete_with_steps), progress (wf_progress), the
-- reserved "wf:" event names and the rights of the new functions. Every bad
-- input with its SQLSTATE and proof that it changed nothing.
-- Queues of this file: wf2_*; events: wf2*; roles: wf2_*.
-- Ids, uuids and timestamps are never printed: jobs and workflows are
-- registered under names (wf2_reg) and shown by them.
-- Time: a few waits of 10 ms, one await timeout (pg_sleep 1.3), and three
-- leases of 0.3 s left to expire (the background worker ends those jobs):
-- about 4 s in all.

-- ===== 0. Helpers =====
-- Names of ids (job ids and workflow uuids, as text). The helpers that read
-- tables are SECURITY DEFINER: section 8 calls them as roles without rights;
-- wf2_bad and wf2_quiet run the calls themselves as the caller.
CREATE TABLE wf2_names (name text PRIMARY KEY, val text NOT NULL);
CREATE FUNCTION wf2_reg(n text, v anyelement) RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF v IS NULL THEN
        RETURN n || ' is NULL';
    END IF;
    INSERT INTO wf2_names VALUES (n, v::text) ON CONFLICT (name) DO UPDATE SET val = excluded.val;
    RETURN n;
END
$$;
CREATE FUNCTION wf2_job(n text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS
    $$SELECT val::bigint FROM wf2_names WHERE name = n$$;
CREATE FUNCTION wf2_wf(n text) RETURNS uuid LANGUAGE sql SECURITY DEFINER AS
    $$SELECT val::uuid FROM wf2_names WHERE name = n$$;
-- The job id of a step of a registered workflow.
CREATE FUNCTION wf2_step(w text, step text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS
    $$SELECT id FROM wf.job WHERE workflow_id = wf2_wf(w) AND step_name = step$$;

-- A string with registered ids replaced by <name>: a whole uuid string,
-- "job <id>" in messages; any other uuid by <uuid>.
CREATE FUNCTION wf2_str(s text) RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r record;
BEGIN
    IF s IS NULL THEN
        RETURN NULL;
    END IF;
    FOR r IN SELECT name, val FROM wf2_names ORDER BY length(val) DESC, name LOOP
        IF r.val ~ '^\d+$' THEN
            s := regexp_replace(s, 'job ' || r.val || '\M', 'job <' || r.name || '>', 'g');
        ELSE
            s := replace(s, r.val, '<' || r.name || '>');
        END IF;
    END LOOP;
    RETURN regexp_replace(s, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
                          '<uuid>', 'g');
END
$$;

-- A jsonb document (wf_workflow, events, results) without what cannot be
-- printed: timestamps become true (set) or false (null); job ids ("id",
-- "child_of") and uuids become <name>.
CREATE FUNCTION wf2_doc(doc jsonb) RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    out jsonb;
    k text;
    v jsonb;
BEGIN
    IF doc IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(doc) = 'array' THEN
        SELECT coalesce(jsonb_agg(wf2_doc(e) ORDER BY n), '[]')
          INTO out FROM jsonb_array_elements(doc) WITH ORDINALITY AS a(e, n);
        RETURN out;
    END IF;
    IF jsonb_typeof(doc) = 'string' THEN
        RETURN to_jsonb(wf2_str(doc #>> '{}'));
    END IF;
    IF jsonb_typeof(doc) IS DISTINCT FROM 'object' THEN
        RETURN doc;
    END IF;
    out := '{}';
    FOR k, v IN SELECT * FROM jsonb_each(doc) LOOP
        IF k LIKE '%\_at' OR k IN ('since', 'timeout_at') THEN
            v := to_jsonb(v <> 'null');
        ELSIF k IN ('id', 'child_of') AND jsonb_typeof(v) = 'number' THEN
            v := to_jsonb(coalesce((SELECT '<' || name || '>' FROM wf2_names
                                     WHERE val = v::text ORDER BY name LIMIT 1), '<job>'));
        ELSIF k = 'worker' AND v #>> '{}' ~ '^pid \d+$' THEN
            v := to_jsonb('pid <pid>'::text);
        ELSE
            v := wf2_doc(v);
        END IF;
        out := out || jsonb_build_object(k, v);
    END LOOP;
    RETURN out;
END
$$;

-- A fingerprint of everything of this file a call could change: its jobs
-- (every column), running claims (progress included), ready rows and event
-- waits, workflows, children, workflow keys, events and queue settings.
CREATE FUNCTION wf2_state() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT concat_ws(' / ',
        (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY queue, id), ''))
           FROM wf.job j WHERE queue LIKE 'wf2\_%'),
        (SELECT md5(coalesce(string_agg(c::text, ',' ORDER BY queue, id), ''))
           FROM wf.claim c WHERE queue LIKE 'wf2\_%'),
        (SELECT count(*) FROM wf.ready WHERE queue LIKE 'wf2\_%'),
        (SELECT md5(coalesce(string_agg(e::text, ',' ORDER BY queue, id), ''))
           FROM wf.event_wait e WHERE queue LIKE 'wf2\_%'),
        (SELECT md5(coalesce(string_agg(w::text, ',' ORDER BY id), ''))
           FROM wf.workflow w
          WHERE id IN (SELECT workflow_id FROM wf.job WHERE queue LIKE 'wf2\_%')),
        (SELECT md5(coalesce(string_agg(c::text, ',' ORDER BY workflow_id), ''))
           FROM wf.child c WHERE parent_queue LIKE 'wf2\_%'),
        (SELECT md5(coalesce(string_agg(k::text, ',' ORDER BY key), ''))
           FROM wf.workflow_key k WHERE key LIKE 'wf2%'),
        (SELECT md5(coalesce(string_agg(e::text, ',' ORDER BY name), ''))
           FROM wf.event e WHERE name LIKE 'wf2%' OR name LIKE 'wf:%'),
        -- (key_order_sweep is the worker's to clear, at any time)
        (SELECT md5(coalesce(string_agg((to_jsonb(q) - 'key_order_sweep')::text, ',' ORDER BY queue), ''))
           FROM wf.queue_config q WHERE queue LIKE 'wf2\_%'))
$$;

-- Runs each call (the text after SELECT) in order: its error as
-- 'SQLSTATE: message' (or 'ok'), and whether wf2_state() is unchanged.
CREATE FUNCTION wf2_bad(calls text[])
RETURNS TABLE (call text, error text, unchanged boolean) LANGUAGE plpgsql AS $$
DECLARE
    before text;
BEGIN
    FOREACH call IN ARRAY calls LOOP
        before := wf2_state();
        error := wf2_str(try_sql('SELECT ' || call));
        unchanged := wf2_state() = before;
        RETURN NEXT;
    END LOOP;
END
$$;

-- A call that returns a value: that value (masked) and whether wf2_state()
-- is unchanged.
CREATE FUNCTION wf2_quiet(call text)
RETURNS TABLE (result text, unchanged boolean) LANGUAGE plpgsql AS $$
DECLARE
    before text := wf2_state();
BEGIN
    EXECUTE 'SELECT (' || call || ')::text' INTO result;
    result := coalesce(wf2_str(result), 'NULL');
    unchanged := wf2_state() = before;
    RETURN NEXT;
END
$$;

-- Waits (up to 20 s, quietly) until a condition holds, for what another
-- process does (the background worker); whether it held.
CREATE FUNCTION wf2_wait_for(cond text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
BEGIN
    FOR i IN 1..400 LOOP
        EXECUTE 'SELECT coalesce((' || cond || ')::boolean, false)' INTO ok;
        EXIT WHEN ok;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN ok;
END
$$;

-- The jobs of a queue, one line: name:status[:attempt>0], a name being the
-- step name or else the payload (a JSON string).
CREATE FUNCTION wf2_jobs(q text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(coalesce(step_name, payload #>> '{}') || ':' || status
                      || CASE WHEN attempt > 0 THEN ':' || attempt ELSE '' END, ', ' ORDER BY id)
      FROM wf.jobs WHERE queue = q
$$;

-- ===== 1. Child workflows =====
-- A plain job starts two children: "fetch" (a -> b, and z) and "one" (a
-- single step). The same name again returns the same child (the second
-- spec is ignored).
SELECT wf2_reg('par', wf_enqueue('wf2_par', '"parent"'));
SELECT wf2_reg('par', id), attempt FROM wf_claim('wf2_par');
SELECT wf2_reg('fetch', wf_start_child('wf2_par', wf2_job('par'), 1, 'fetch',
       '{"queue": "wf2_kid", "steps": [{"name": "a", "payload": 1},
                                       {"name": "b", "after": ["a"]}, {"name": "z"}]}'));
SELECT wf2_reg('one', wf_start_child('wf2_par', wf2_job('par'), 1, 'one',
       '{"queue": "wf2_kid", "name": "single", "steps": [{"name": "solo"}]}'));
SELECT * FROM wf2_quiet($$wf_start_child('wf2_par', wf2_job('par'), 1, 'fetch',
       '{"queue": "wf2_other", "steps": [{"name": "other"}]}') = wf2_wf('fetch')$$) AS same_name;
-- Nothing was created in wf2_other.
SELECT count(*) AS other_jobs FROM wf.job WHERE queue = 'wf2_other';
-- The child steps carry the parent job (wf.jobs.child_of) as do their
-- workflows (wf.workflows.child_of); no key.
SELECT wf2_str(workflow_id::text) AS workflow, step_name, status, child_of = wf2_job('par') AS of_par
  FROM wf.jobs WHERE queue = 'wf2_kid' ORDER BY id;
SELECT wf2_str(workflow_id::text) AS workflow, name, status, steps, key,
       child_of = wf2_job('par') AS of_par
  FROM wf.workflows WHERE workflow_id IN (wf2_wf('fetch'), wf2_wf('one')) ORDER BY name;
SELECT name, wf2_str(workflow_id::text) AS workflow, status, outcome, delivered
  FROM wf.child WHERE parent_id = wf2_job('par') ORDER BY name;
-- wf_workflow: top-level "key" and "child_of"; per step "version",
-- "progress" and "children".
SELECT jsonb_pretty(wf2_doc(wf_workflow(wf2_wf('one')))) AS one;

-- The parent awaits its children: parked as waiting for 'wf:children', its
-- attempt not spent (max_attempts grows by one, as wf_await_event does).
SELECT max_attempts AS max_before FROM wf.job WHERE id = wf2_job('par') \gset
SELECT wf_await_children('wf2_par', wf2_job('par'), 1);
SELECT status, waiting_for, attempt, max_attempts - :max_before AS added_attempts, events
  FROM wf.jobs WHERE id = wf2_job('par');
SELECT count(*) AS claimable FROM wf_claim('wf2_par');

-- The children run. "one" ends first: its outcome is in the parent's events
-- at once; the parent waits on for "fetch".
SELECT wf2_reg('kid.' || step_name, id) FROM wf_claim('wf2_kid', max_jobs => 10) ORDER BY 1;
SELECT wf_complete('wf2_kid', wf2_job('kid.solo'), 1, '{"solo": true}');
SELECT status, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('par');
SELECT name, status, wf2_doc(outcome) AS outcome, delivered, finished_at IS NOT NULL AS finished
  FROM wf.child WHERE parent_id = wf2_job('par') ORDER BY name;
SELECT wf_complete('wf2_kid', wf2_job('kid.a'), 1, '"a done"');
SELECT wf_complete('wf2_kid', wf2_job('kid.z'), 1, '{"z": 26}');
SELECT wf2_reg('kid.b', id), inputs FROM wf_claim('wf2_kid');
SELECT status FROM wf.jobs WHERE id = wf2_job('par');
-- b fails for good: "fetch" failed. Its outcome: status failed, the results
-- of its final steps that are done (z; b failed), the first failed step's
-- error. The parent is not failed: it is ready again, and decides.
SELECT wf_fail('wf2_kid', wf2_job('kid.b'), 1, 'b broke', permanent => true);
SELECT status, attempt, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('par');
SELECT name, status, delivered FROM wf.child WHERE parent_id = wf2_job('par') ORDER BY name;
SELECT attempt, wf2_doc(events) AS events FROM wf_claim('wf2_par');
-- Idempotent from any attempt: "fetch" again is the same child.
SELECT * FROM wf2_quiet($$wf_start_child('wf2_par', wf2_job('par'), 2, 'fetch',
       '{"queue": "wf2_kid", "steps": [{"name": "x"}]}') = wf2_wf('fetch')$$) AS same_child;
-- Every child delivered: awaiting them again is 'pending' (ready at once).
SELECT wf_await_children('wf2_par', wf2_job('par'), 2);
SELECT attempt, events ? 'wf:child:fetch' AS has_fetch FROM wf_claim('wf2_par');
SELECT wf_complete('wf2_par', wf2_job('par'), 3, '"parent done"');
-- An outcome is delivered once: retrying the child's failed step, which
-- then succeeds, changes neither the recorded outcome nor the parent's events.
SELECT events AS par_events FROM wf.job WHERE id = wf2_job('par') \gset
SELECT wf_retry('wf2_kid', wf2_job('kid.b'));
SELECT id = wf2_job('kid.b') AS b_again, inputs FROM wf_claim('wf2_kid');
SELECT wf_complete('wf2_kid', wf2_job('kid.b'), 2, '"b fixed"');
SELECT status FROM wf.workflows WHERE workflow_id = wf2_wf('fetch');
SELECT name, status, wf2_doc(outcome) AS outcome FROM wf.child WHERE name = 'fetch' AND parent_id = wf2_job('par');
SELECT events = :'par_events'::jsonb AS par_events_unchanged, status FROM wf.jobs WHERE id = wf2_job('par');

-- A parent that does not await gets the outcome too: it is in its row while
-- it runs, and its next claim reads it. Awaiting children that have all
-- been delivered is 'pending'.
SELECT wf2_reg('par2', wf_enqueue('wf2_par', '"parent 2"'));
SELECT id = wf2_job('par2') AS claimed FROM wf_claim('wf2_par');
SELECT wf2_reg('quick', wf_start_child('wf2_par', wf2_job('par2'), 1, 'quick',
       '{"queue": "wf2_kid2", "steps": [{"name": "q1"}]}'));
SELECT wf2_reg('q1', id) FROM wf_claim('wf2_kid2');
SELECT wf_complete('wf2_kid2', wf2_job('q1'), 1, '[1, 2]');
SELECT status, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('par2');
SELECT wf_await_children('wf2_par', wf2_job('par2'), 1);
SELECT attempt, wf2_doc(events) AS events FROM wf_claim('wf2_par');
SELECT wf_complete('wf2_par', wf2_job('par2'), 2);
-- A job that never started a child: 'pending', ready again at once, no
-- attempt spent.
SELECT wf2_reg('lone', wf_enqueue('wf2_par', '"lone"'));
SELECT id = wf2_job('lone') AS claimed FROM wf_claim('wf2_par');
SELECT wf_await_children('wf2_par', wf2_job('lone'), 1);
SELECT status, waiting_for, events FROM wf.jobs WHERE id = wf2_job('lone');
SELECT attempt, max_attempts - 5 AS added_attempts, events FROM wf_claim('wf2_par');
SELECT wf_complete('wf2_par', wf2_job('lone'), 2);

-- A child of a child: workflow "tree" (step top) starts "mid" (step m),
-- whose step starts "leaf" (step l). wf_workflow shows each step's
-- children, 'running' while unfinished.
SELECT wf2_reg('tree', wf_submit('{"name": "tree", "queue": "wf2_tree", "steps": [{"name": "top"}]}'));
SELECT wf2_reg('top', id) FROM wf_claim('wf2_tree');
SELECT wf2_reg('mid', wf_start_child('wf2_tree', wf2_job('top'), 1, 'mid',
       '{"queue": "wf2_mid", "steps": [{"name": "m", "payload": "m"}]}'));
SELECT wf_await_children('wf2_tree', wf2_job('top'), 1);
SELECT wf2_reg('m', id) FROM wf_claim('wf2_mid');
SELECT wf2_reg('leaf', wf_start_child('wf2_mid', wf2_job('m'), 1, 'leaf',
       '{"queue": "wf2_leaf", "steps": [{"name": "l1"}, {"name": "l2", "after": ["l1"]}]}'));
SELECT wf_await_children('wf2_mid', wf2_job('m'), 1);
SELECT jsonb_pretty(wf2_doc(wf_workflow(wf2_wf('tree')) -> 'steps')) AS tree_steps;
SELECT (wf2_doc(wf_workflow(wf2_wf('mid')))) -> 'child_of' AS mid_child_of,
       (wf2_doc(wf_workflow(wf2_wf('leaf')))) -> 'child_of' AS leaf_child_of,
       wf2_doc(wf_workflow(wf2_wf('mid')) -> 'steps' -> 0 -> 'children') AS m_children;
SELECT wf2_reg('l1', id) FROM wf_claim('wf2_leaf');
SELECT wf_complete('wf2_leaf', wf2_job('l1'), 1, '"l1"');
SELECT wf2_reg('l2', id), inputs FROM wf_claim('wf2_leaf');
SELECT wf_complete('wf2_leaf', wf2_job('l2'), 1, '{"leaf": "done"}');
-- leaf's outcome reaches m (results: the final step l2 only); m is ready.
SELECT attempt, wf2_doc(events) AS events FROM wf_claim('wf2_mid');
SELECT wf_complete('wf2_mid', wf2_job('m'), 2, '{"mid": "done"}');
-- mid's outcome reaches top.
SELECT attempt, wf2_doc(events) AS events FROM wf_claim('wf2_tree');
SELECT wf2_doc(wf_workflow(wf2_wf('tree')) -> 'steps' -> 0 -> 'children') AS top_children;
SELECT wf_complete('wf2_tree', wf2_job('top'), 2);
SELECT wf2_str(workflow_id::text) AS workflow, name, status, key, child_of IS NOT NULL AS is_child
  FROM wf.workflows WHERE workflow_id IN (wf2_wf('tree'), wf2_wf('mid'), wf2_wf('leaf'))
 ORDER BY started_at, name;

-- Cancelling the parent's workflow cancels its children, transitively: the
-- parent step awaits "kid" (k1 -> k3, k2), whose step k1 awaits "grand"
-- (g1, g2). Running child steps (k2, g1) are flagged and end cancelled
-- when they stop; every outcome is delivered.
SELECT wf2_reg('cw', wf_submit('{"queue": "wf2_cp", "steps": [{"name": "p"}]}'));
SELECT wf2_reg('cw.p', id) FROM wf_claim('wf2_cp');
SELECT wf2_reg('kid', wf_start_child('wf2_cp', wf2_job('cw.p'), 1, 'kid',
       '{"queue": "wf2_cc", "steps": [{"name": "k1"}, {"name": "k2"}, {"name": "k3", "after": ["k1"]}]}'));
SELECT wf_await_children('wf2_cp', wf2_job('cw.p'), 1);
SELECT wf2_reg('cc.' || step_name, id) FROM wf_claim('wf2_cc', max_jobs => 10) ORDER BY 1;
SELECT wf2_reg('grand', wf_start_child('wf2_cc', wf2_job('cc.k1'), 1, 'grand',
       '{"queue": "wf2_cg", "steps": [{"name": "g1"}, {"name": "g2"}]}'));
SELECT wf_await_children('wf2_cc', wf2_job('cc.k1'), 1);
SELECT wf2_reg('cg.g1', id) FROM wf_claim('wf2_cg');
SELECT wf_cancel_workflow(wf2_wf('cw'));
SELECT queue, step_name, status, cancel_requested, last_error
  FROM wf.jobs WHERE queue IN ('wf2_cp', 'wf2_cc', 'wf2_cg') ORDER BY id;
SELECT wf2_str(workflow_id::text) AS workflow, status, cancelled_at IS NOT NULL AS cancelled_at_set
  FROM wf.workflows WHERE workflow_id IN (wf2_wf('cw'), wf2_wf('kid'), wf2_wf('grand'))
 ORDER BY started_at;
-- The flagged steps stop: they end cancelled, and the children are settled.
SELECT wf_complete('wf2_cc', wf2_job('cc.k2'), 1, '"k2"');
SELECT wf_fail('wf2_cg', wf2_job('cg.g1'), 1, 'g1 stopped');
SELECT queue, step_name, status, last_error
  FROM wf.jobs WHERE queue IN ('wf2_cc', 'wf2_cg') AND step_name IN ('k2', 'g1') ORDER BY id;
SELECT name, status, wf2_doc(outcome) AS outcome, delivered
  FROM wf.child WHERE parent_queue IN ('wf2_cp', 'wf2_cc') ORDER BY name;
SELECT step_name, wf2_doc(events) AS events
  FROM wf.jobs WHERE id IN (wf2_job('cw.p'), wf2_job('cc.k1')) ORDER BY id;

-- wf_cancel of a waiting parent cancels its children at once.
SELECT wf2_reg('wp', wf_enqueue('wf2_cp', '"waiting parent"'));
SELECT id = wf2_job('wp') AS claimed FROM wf_claim('wf2_cp');
SELECT wf2_reg('wk', wf_start_child('wf2_cp', wf2_job('wp'), 1, 'wk',
       '{"queue": "wf2_cc2", "steps": [{"name": "w1"}, {"name": "w2", "after": ["w1"]}]}'));
SELECT wf_await_children('wf2_cp', wf2_job('wp'), 1);
SELECT wf_cancel('wf2_cp', wf2_job('wp'));
SELECT wf2_jobs('wf2_cc2') AS wk_steps, status AS wp_status FROM wf.jobs WHERE id = wf2_job('wp');
SELECT name, status, delivered FROM wf.child WHERE parent_id = wf2_job('wp');
-- wf_cancel of a running parent flags it; its children are cancelled when
-- it ends cancelled.
SELECT wf2_reg('rp', wf_enqueue('wf2_cp', '"running parent"'));
SELECT id = wf2_job('rp') AS claimed FROM wf_claim('wf2_cp');
SELECT wf2_reg('rk', wf_start_child('wf2_cp', wf2_job('rp'), 1, 'rk',
       '{"queue": "wf2_cc3", "steps": [{"name": "r1"}]}'));
SELECT wf_cancel('wf2_cp', wf2_job('rp'));
SELECT wf2_jobs('wf2_cc3') AS rk_steps, status AS rp_status, cancel_requested
  FROM wf.jobs WHERE id = wf2_job('rp');
-- A cancel was requested: no new child, the same name neither (NULL), and
-- awaiting children ends the job cancelled.
SELECT * FROM wf2_quiet($$wf_start_child('wf2_cp', wf2_job('rp'), 1, 'rk2',
       '{"queue": "wf2_cc3", "steps": [{"name": "r2"}]}')$$) AS new_child;
SELECT * FROM wf2_quiet($$wf_start_child('wf2_cp', wf2_job('rp'), 1, 'rk',
       '{"queue": "wf2_cc3", "steps": [{"name": "r1"}]}')$$) AS same_child;
SELECT wf_await_children('wf2_cp', wf2_job('rp'), 1);
SELECT wf2_jobs('wf2_cc3') AS rk_steps, status AS rp_status FROM wf.jobs WHERE id = wf2_job('rp');
SELECT name, status, delivered FROM wf.child WHERE parent_id = wf2_job('rp');
-- A child cancelled on its own: the parent sees 'cancelled' and is not cancelled.
SELECT wf2_reg('cp2', wf_enqueue('wf2_cp', '"parent of a cancelled child"'));
SELECT id = wf2_job('cp2') AS claimed FROM wf_claim('wf2_cp');
SELECT wf2_reg('victim', wf_start_child('wf2_cp', wf2_job('cp2'), 1, 'victim',
       '{"queue": "wf2_cc4", "steps": [{"name": "v1"}]}'));
SELECT wf_await_children('wf2_cp', wf2_job('cp2'), 1);
SELECT wf_cancel_workflow(wf2_wf('victim'));
SELECT status, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('cp2');
SELECT attempt, events -> 'wf:child:victim' ->> 'status' AS victim FROM wf_claim('wf2_cp');
SELECT wf_complete('wf2_cp', wf2_job('cp2'), 2);

-- A timeout: the parent wakes with {"wf:children": {"status": "timed_out"}}
-- once it has passed (wf_sweep, or the background worker, wakes it). The
-- child's outcome still comes later.
SELECT wf2_reg('tp', wf_enqueue('wf2_tp', '"timed parent"'));
SELECT id = wf2_job('tp') AS claimed FROM wf_claim('wf2_tp');
SELECT wf2_reg('slow', wf_start_child('wf2_tp', wf2_job('tp'), 1, 'slow',
       '{"queue": "wf2_tk", "steps": [{"name": "s1"}]}'));
SELECT wf_await_children('wf2_tp', wf2_job('tp'), 1, timeout => '1 second');
SELECT status, waiting_for FROM wf.jobs WHERE id = wf2_job('tp');
SELECT pg_sleep(1.3);
SELECT wf_sweep() >= 0 AS swept;
SELECT status, attempt, events FROM wf.jobs WHERE id = wf2_job('tp');
SELECT attempt, events FROM wf_claim('wf2_tp');
SELECT wf2_reg('s1', id) FROM wf_claim('wf2_tk');
SELECT wf_complete('wf2_tk', wf2_job('s1'), 1, '"slow done"');
SELECT wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('tp');
SELECT wf_complete('wf2_tp', wf2_job('tp'), 2);

-- The parent's row is held by another transaction when its child ends:
-- the outcome is recorded, and its delivery left to the background worker.
-- This session holds the parent (FOR UPDATE) while the worker ends the
-- child's only step (its 0.3 s lease expires, no attempt left); after the
-- commit, the worker delivers the outcome and wakes the parent.
SELECT wf2_reg('hp', wf_enqueue('wf2_hp', '"held parent"'));
SELECT id = wf2_job('hp') AS claimed FROM wf_claim('wf2_hp');
SELECT wf2_reg('held', wf_start_child('wf2_hp', wf2_job('hp'), 1, 'held',
       '{"queue": "wf2_hk", "steps": [{"name": "h1", "max_attempts": 1}]}'));
SELECT wf_await_children('wf2_hp', wf2_job('hp'), 1);
SELECT count(*) AS claimed FROM wf_claim('wf2_hk', lease => '0.3 seconds');
BEGIN;
SELECT status FROM wf.job WHERE id = wf2_job('hp') FOR UPDATE;
SELECT wf2_wait_for($$(SELECT status IS NOT NULL FROM wf.child WHERE workflow_id = wf2_wf('held'))$$)
       AS child_ended;
SELECT name, status, delivered FROM wf.child WHERE workflow_id = wf2_wf('held');
SELECT status, events FROM wf.job WHERE id = wf2_job('hp');
COMMIT;
SELECT wf2_wait_for($$(SELECT delivered FROM wf.child WHERE workflow_id = wf2_wf('held'))$$)
       AS delivered;
SELECT wf2_wait_for($$(SELECT status = 'pending' FROM wf.job WHERE id = wf2_job('hp'))$$)
       AS woken;
SELECT status, wf2_doc(events #- '{wf:child:held,error}') AS events,
       events #>> '{wf:child:held,error}' LIKE 'worker lost: lease expired%' AS lease_error
  FROM wf.jobs WHERE id = wf2_job('hp');
SELECT attempt FROM wf_claim('wf2_hp');
SELECT wf_complete('wf2_hp', wf2_job('hp'), 2);

-- Bad input: each with its SQLSTATE, nothing changed. bj: a running plain
-- job of wf2_bad (attempt 1).
SELECT wf2_reg('bj', wf_enqueue('wf2_bad', '"bad input"'));
SELECT wf_configure_queue('wf2_bad_ord', ordered => true);
SELECT id = wf2_job('bj') AS claimed FROM wf_claim('wf2_bad');
SELECT * FROM wf2_bad(ARRAY[
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '{"key": "wf2-k", "queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '{"queue": "wf2_bk", "steps": []}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '{"queue": "wf2_bk", "steps": [{"name": "a", "after": ["x"]}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '{"steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '[{"name": "a"}]')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', '{"queue": "wf2_bad_ord", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, '', '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, repeat('n', 257), '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, NULL, '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), 1, 'c', NULL)$$,
  $$wf_start_child(NULL, wf2_job('bj'), 1, 'c', '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', NULL, 1, 'c', '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_start_child('wf2_bad', wf2_job('bj'), NULL, 'c', '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$,
  $$wf_await_children('wf2_bad', wf2_job('bj'), 1, '-1 second')$$,
  $$wf_await_children('wf2_bad', wf2_job('bj'), 1, '101 years')$$,
  $$wf_await_children(NULL, wf2_job('bj'), 1)$$,
  $$wf_await_children('wf2_bad', wf2_job('bj'), NULL)$$]);
-- Stale tokens: NULL, and nothing changed.
SELECT * FROM wf2_quiet($$wf_start_child('wf2_bad', wf2_job('bj'), 2, 'c',
       '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$) AS stale_start;
SELECT * FROM wf2_quiet($$wf_start_child('wf2_bad', -1, 1, 'c',
       '{"queue": "wf2_bk", "steps": [{"name": "a"}]}')$$) AS unknown_job_start;
SELECT * FROM wf2_quiet($$wf_await_children('wf2_bad', wf2_job('bj'), 2)$$) AS stale_await;
SELECT * FROM wf2_quiet($$wf_await_children('wf2_nowhere', wf2_job('bj'), 1)$$) AS other_queue_await;
SELECT wf2_jobs('wf2_bad') AS bad_jobs, count(*) AS bk_jobs FROM wf.job WHERE queue = 'wf2_bk';

-- ===== 2. Versions =====
-- wf_enqueue(version =>); a queue's default version (wf_configure_queue):
-- for jobs that name none, wf_enqueue_batch's included; '' removes it,
-- NULL (or leaving it out) keeps it.
SELECT wf_enqueue('wf2_ver', '"e-none"') IS NOT NULL AS e1,
       wf_enqueue('wf2_ver', '"e-v1"', version => 'v1') IS NOT NULL AS e2;
SELECT wf_configure_queue('wf2_ver', version => 'vq');
SELECT version FROM wf.queue_config WHERE queue = 'wf2_ver';
SELECT wf_enqueue('wf2_ver', '"e-default"') IS NOT NULL AS e3,
       wf_enqueue('wf2_ver', '"e-own"', version => 'v2') IS NOT NULL AS e4;
SELECT count(*) AS batch FROM wf_enqueue_batch('wf2_ver', '["b1", "b2"]');
SELECT wf_configure_queue('wf2_ver', max_attempts => 7);
SELECT wf_configure_queue('wf2_ver', version => NULL);
SELECT version FROM wf.queue_config WHERE queue = 'wf2_ver';
SELECT wf_configure_queue('wf2_ver', version => '');
SELECT version IS NULL AS removed FROM wf.queue_config WHERE queue = 'wf2_ver';
SELECT wf_enqueue('wf2_ver', '"e-after-removal"') IS NOT NULL AS e5;
SELECT payload #>> '{}' AS job, version FROM wf.jobs WHERE queue = 'wf2_ver' ORDER BY id;
-- wf_submit: a step's "version", else the spec's, else the queue's default.
SELECT wf_configure_queue('wf2_ver_s', version => 'vq');
SELECT wf2_reg('vs', wf_submit('{"queue": "wf2_ver_s", "version": "vspec", "steps": [
    {"name": "own", "version": "vstep"}, {"name": "spec"}, {"name": "other", "queue": "wf2_ver_o"}]}'));
SELECT wf2_reg('vq', wf_submit('{"queue": "wf2_ver_s", "steps": [
    {"name": "queue_default"}, {"name": "no_default", "queue": "wf2_ver_o"}]}'));
SELECT wf2_str(workflow_id::text) AS workflow, step_name, queue, version
  FROM wf.jobs WHERE workflow_id IN (wf2_wf('vs'), wf2_wf('vq')) ORDER BY id;
SELECT wf2_doc(wf_workflow(wf2_wf('vs')) -> 'steps' -> 0) ->> 'version' AS own_in_workflow;
-- A child's steps: the parent job's version before the child queue's
-- default; the child spec's and a step's own before both.
SELECT wf_configure_queue('wf2_ver_c', version => 'cq');
SELECT wf2_reg('vp', wf_enqueue('wf2_ver_p', '"versioned parent"', version => 'pv'));
SELECT wf2_reg('up', wf_enqueue('wf2_ver_p', '"unversioned parent"'));
SELECT wf2_reg(payload #>> '{}', id) FROM wf_claim('wf2_ver_p', max_jobs => 2) ORDER BY 1;
SELECT wf2_reg('vc1', wf_start_child('wf2_ver_p', wf2_job('vp'), 1, 'vc1',
       '{"queue": "wf2_ver_c", "steps": [{"name": "inherits"}, {"name": "own", "version": "sv"}]}'));
SELECT wf2_reg('vc2', wf_start_child('wf2_ver_p', wf2_job('vp'), 1, 'vc2',
       '{"queue": "wf2_ver_c", "version": "cs", "steps": [{"name": "spec"}]}'));
SELECT wf2_reg('vc3', wf_start_child('wf2_ver_p', wf2_job('up'), 1, 'vc3',
       '{"queue": "wf2_ver_c", "steps": [{"name": "queue_default"}, {"name": "none", "queue": "wf2_ver_o"}]}'));
SELECT wf2_str(workflow_id::text) AS workflow, step_name, version
  FROM wf.jobs WHERE workflow_id IN (wf2_wf('vc1'), wf2_wf('vc2'), wf2_wf('vc3')) ORDER BY id;
-- wf_complete_with_steps: the completing step's version before the queue
-- default; a step's own first. (vf2's split got the default of its queue,
-- removed since: the steps it adds get split's version.)
SELECT wf2_reg('vf', wf_submit('{"queue": "wf2_ver_f", "version": "fv", "steps": [{"name": "split"}]}'));
SELECT wf_configure_queue('wf2_ver_f2', version => 'f2q');
SELECT wf2_reg('vf2', wf_submit('{"queue": "wf2_ver_f2", "steps": [{"name": "split"}]}'));
SELECT wf_configure_queue('wf2_ver_f2', version => '');
SELECT count(*) AS claimed FROM wf_claim('wf2_ver_f');
SELECT wf2_reg('vf2.split', id) FROM wf_claim('wf2_ver_f2', versions => ARRAY['f2q']);
SELECT wf_configure_queue('wf2_ver_o', version => 'oq');
SELECT wf_complete_with_steps('wf2_ver_f', wf2_step('vf', 'split'), 1, '"s"',
       '[{"name": "inherits"}, {"name": "own", "version": "x1"}, {"name": "elsewhere", "queue": "wf2_ver_o"}]');
SELECT wf_complete_with_steps('wf2_ver_f2', wf2_job('vf2.split'), 1, '"s"',
       '[{"name": "inherits"}, {"name": "elsewhere", "queue": "wf2_ver_o"}]');
SELECT wf2_str(workflow_id::text) AS workflow, step_name, queue, version
  FROM wf.jobs WHERE workflow_id IN (wf2_wf('vf'), wf2_wf('vf2')) ORDER BY id;
SELECT wf_configure_queue('wf2_ver_o', version => '');

-- Claims with versions: only jobs of those versions, in claim order
-- (priority first) across versions; jobs without a version are not
-- claimed then. NULL claims any job.
SELECT wf_enqueue('wf2_vc', '"none"') IS NOT NULL,
       wf_enqueue('wf2_vc', '"a1"', version => 'a') IS NOT NULL,
       wf_enqueue('wf2_vc', '"b1"', version => 'b', priority => 5) IS NOT NULL,
       wf_enqueue('wf2_vc', '"a2"', version => 'a', priority => 9) IS NOT NULL,
       wf_enqueue('wf2_vc', '"c1"', version => 'c') IS NOT NULL,
       wf_enqueue('wf2_vc', '"a3"', version => 'a') IS NOT NULL;
SELECT queue, version, blocked, pending, running, waiting, oldest_ready_age IS NOT NULL AS has_age
  FROM wf.version_stats WHERE queue = 'wf2_vc' ORDER BY version NULLS FIRST;
SELECT string_agg(payload #>> '{}', ',' ORDER BY n) AS claimed
  FROM wf_claim('wf2_vc', max_jobs => 3, versions => ARRAY['a', 'b']) WITH ORDINALITY AS c(id, attempt, queue, payload, workflow_id, step_name, priority, max_attempts, idempotency_key, inputs, lease_expires_at, checkpoints, events, n);
SELECT count(*) AS claimed FROM wf_claim('wf2_vc', max_jobs => 10, versions => ARRAY['nothing']);
SELECT queue, version, pending, running FROM wf.version_stats WHERE queue = 'wf2_vc' ORDER BY version NULLS FIRST;
-- wf_complete_and_claim(versions =>): completes, then claims only those.
SELECT wf2_reg('a2', id) FROM wf.job WHERE queue = 'wf2_vc' AND payload = '"a2"';
SELECT completed, payload FROM wf_complete_and_claim('wf2_vc', wf2_job('a2'), 1, '"r"', versions => ARRAY['c']);
SELECT wf2_reg('c1', id) FROM wf.job WHERE queue = 'wf2_vc' AND payload = '"c1"';
SELECT completed, payload FROM wf_complete_and_claim('wf2_vc', wf2_job('c1'), 1, '"r"', versions => ARRAY['c', 'b']);
SELECT wf2_jobs('wf2_vc') AS jobs;
-- NULL: any job, versioned or not.
SELECT string_agg(payload #>> '{}', ',' ORDER BY payload #>> '{}') AS claimed
  FROM wf_claim('wf2_vc', max_jobs => 10, versions => NULL);
SELECT count(*) AS unfinished_rows FROM wf.version_stats WHERE queue = 'wf2_vc' AND pending + blocked + waiting > 0;
-- A retried job keeps its version (claimable with it).
SELECT wf2_reg('rv', wf_enqueue('wf2_vr', '"rv"', version => 'r1', max_attempts => 1));
SELECT id = wf2_job('rv') AS claimed FROM wf_claim('wf2_vr', versions => ARRAY['r1']);
SELECT wf_fail('wf2_vr', wf2_job('rv'), 1, 'once');
SELECT wf_retry('wf2_vr', wf2_job('rv'));
SELECT id = wf2_job('rv') AS claimed_again, attempt FROM wf_claim('wf2_vr', versions => ARRAY['r1']);
SELECT wf_complete('wf2_vr', wf2_job('rv'), 2);

-- Bad versions and version claims, each with its SQLSTATE, nothing changed.
-- A claim with versions in a queue with flow control is 0A000 (and a
-- wf_complete_and_claim's completion is rolled back with it).
SELECT wf_configure_queue('wf2_vf_rate', rate_limit => 100);
SELECT wf_configure_queue('wf2_vf_krate', key_rate_limit => 100);
SELECT wf_configure_queue('wf2_vf_kc', key_concurrency => 2);
SELECT wf_configure_queue('wf2_vf_fair', fair => true);
SELECT wf_configure_queue('wf2_vf_ord', ordered => true);
SELECT wf2_reg('fair1', wf_enqueue('wf2_vf_fair', '"f1"', key => 'k', version => 'a'));
SELECT wf2_reg('fair2', wf_enqueue('wf2_vf_fair', '"f2"', key => 'k', version => 'a'));
SELECT id = wf2_job('fair1') AS claimed FROM wf_claim('wf2_vf_fair');
SELECT wf2_reg('vok', wf_enqueue('wf2_vc2', '"ok"', version => 'a'));
SELECT id = wf2_job('vok') AS claimed FROM wf_claim('wf2_vc2');
SELECT * FROM wf2_bad(ARRAY[
  $$count(*) FROM wf_claim('wf2_vc', versions => ARRAY[]::text[])$$,
  $$count(*) FROM wf_claim('wf2_vc', versions => ARRAY['a', NULL])$$,
  $$count(*) FROM wf_claim('wf2_vc', versions => ARRAY[''])$$,
  $$count(*) FROM wf_claim('wf2_vc', versions => ARRAY[repeat('v', 257)])$$,
  $$count(*) FROM wf_claim('wf2_vf_rate', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_claim('wf2_vf_krate', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_claim('wf2_vf_kc', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_claim('wf2_vf_fair', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_claim('wf2_vf_ord', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_complete_and_claim('wf2_vf_fair', wf2_job('fair1'), 1, '"r"', versions => ARRAY['a'])$$,
  $$count(*) FROM wf_complete_and_claim('wf2_vc2', wf2_job('vok'), 1, '"r"', versions => ARRAY[]::text[])$$,
  $$count(*) FROM wf_complete_and_claim('wf2_vc2', wf2_job('vok'), 1, '"r"', versions => ARRAY[NULL]::text[])$$,
  $$wf_enqueue('wf2_vc', '{}', version => '')$$,
  $$wf_enqueue('wf2_vc', '{}', version => repeat('v', 257))$$,
  $$wf_configure_queue('wf2_vc', version => repeat('v', 257))$$,
  $$wf_configure_queue('wf2_vnew', version => repeat('v', 257))$$,
  $$wf_submit('{"queue": "wf2_vc", "version": 1, "steps": [{"name": "a"}]}')$$,
  $$wf_submit('{"queue": "wf2_vc", "version": "", "steps": [{"name": "a"}]}')$$,
  $$wf_submit('{"queue": "wf2_vc", "steps": [{"name": "a", "version": ["v"]}]}')$$,
  $$wf_submit('{"queue": "wf2_vc", "steps": [{"name": "a", "version": ""}]}')$$]);
SELECT status FROM wf.jobs WHERE id IN (wf2_job('fair1'), wf2_job('vok')) ORDER BY id;
SELECT wf_complete('wf2_vf_fair', wf2_job('fair1'), 1), wf_complete('wf2_vc2', wf2_job('vok'), 1);

-- ===== 3. Waiting for a result: wf_wait_job, wf_wait_workflow =====
-- A finished job: at once, with its result or its error.
SELECT wf2_reg('wd', wf_enqueue('wf2_wait', '"will be done"'));
SELECT wf2_reg('wfl', wf_enqueue('wf2_wait', '"will fail"', max_attempts => 1));
SELECT count(*) AS claimed FROM wf_claim('wf2_wait', max_jobs => 2);
SELECT wf_complete('wf2_wait', wf2_job('wd'), 1, '{"answer": 42}');
SELECT wf_fail('wf2_wait', wf2_job('wfl'), 1, 'it broke');
SELECT clock_timestamp() AS t0 \gset
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wd'));
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wfl'), timeout => '1 hour');
SELECT clock_timestamp() - :'t0' < interval '5 seconds' AS at_once;
-- After a timeout: one row with the current status (blocked, pending,
-- running, waiting) and the result and error as they are.
SELECT wf2_reg('wp1', wf_enqueue('wf2_wait', '"pending"'));
SELECT wf2_reg('wb1', wf_enqueue('wf2_wait', '"blocked"', depends_on => ARRAY[wf2_job('wp1')]));
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wp1'), '10 milliseconds');
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wb1'), '0');
SELECT id = wf2_job('wp1') AS claimed FROM wf_claim('wf2_wait');
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wp1'), '10 milliseconds');
SELECT wf_fail('wf2_wait', wf2_job('wp1'), 1, 'retry me', retry_in => '0');
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wp1'), '10 milliseconds');
SELECT id = wf2_job('wp1') AS claimed FROM wf_claim('wf2_wait');
SELECT wf_await_event('wf2_wait', wf2_job('wp1'), 2, 'wf2-wait-event');
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wp1'), '10 milliseconds');
SELECT wf_signal('wf2-wait-event', '{"go": true}');
SELECT id = wf2_job('wp1') AS claimed FROM wf_claim('wf2_wait');
SELECT wf_cancel('wf2_wait', wf2_job('wp1'));
SELECT wf_complete('wf2_wait', wf2_job('wp1'), 3, '"too late"');
SELECT * FROM wf_wait_job('wf2_wait', wf2_job('wp1'));
-- Woken by the commit that ends the job, in another process: the
-- background worker fails this job when its 0.3 s lease expires (its only
-- attempt), long before the 60 s timeout.
SELECT wf2_reg('wl', wf_enqueue('wf2_wait_lease', '"lease"', max_attempts => 1));
SELECT id = wf2_job('wl') AS claimed FROM wf_claim('wf2_wait_lease', lease => '0.3 seconds');
SELECT clock_timestamp() AS t0 \gset
SELECT status, result, error LIKE 'worker lost: lease expired%' AS lease_expired
  FROM wf_wait_job('wf2_wait_lease', wf2_job('wl'), '60 seconds');
SELECT clock_timestamp() - :'t0' < interval '30 seconds' AS before_timeout;

-- wf_wait_workflow: the results of the final steps; the first failed
-- step's error; 'running' after a timeout.
SELECT wf2_reg('ww', wf_submit('{"queue": "wf2_wait", "steps": [
    {"name": "a"}, {"name": "b", "after": ["a"]}, {"name": "c", "after": ["a"]}]}'));
SELECT * FROM wf_wait_workflow(wf2_wf('ww'), '10 milliseconds');
SELECT wf2_reg('ww.a', id) FROM wf_claim('wf2_wait');
SELECT wf_complete('wf2_wait', wf2_job('ww.a'), 1, '"a"');
SELECT wf2_reg('ww.' || step_name, id) FROM wf_claim('wf2_wait', max_jobs => 2) ORDER BY 1;
SELECT wf_complete('wf2_wait', wf2_job('ww.b'), 1, '{"b": 2}');
SELECT * FROM wf_wait_workflow(wf2_wf('ww'), '0');
SELECT wf_complete('wf2_wait', wf2_job('ww.c'), 1, '[3]');
SELECT * FROM wf_wait_workflow(wf2_wf('ww'));
SELECT wf2_reg('wwf', wf_submit('{"queue": "wf2_wait", "steps": [
    {"name": "ok"}, {"name": "bad1", "max_attempts": 1}, {"name": "after_bad", "after": ["bad1"]}]}'));
SELECT wf2_reg('wwf.' || step_name, id) FROM wf_claim('wf2_wait', max_jobs => 2) ORDER BY 1;
SELECT wf_complete('wf2_wait', wf2_job('wwf.ok'), 1, '"fine"');
SELECT wf_fail('wf2_wait', wf2_job('wwf.bad1'), 1, 'bad1 broke');
SELECT status, result, wf2_str(error) AS error FROM wf_wait_workflow(wf2_wf('wwf'));
-- A cancelled workflow.
SELECT wf2_reg('wwc', wf_submit('{"queue": "wf2_wait_c", "steps": [{"name": "x"}]}'));
SELECT wf_cancel_workflow(wf2_wf('wwc'));
SELECT * FROM wf_wait_workflow(wf2_wf('wwc'), '1 minute');
-- Woken by another process's commit: the worker fails the only step when
-- its lease expires.
SELECT wf2_reg('wwl', wf_submit('{"queue": "wf2_wait_lease", "steps": [{"name": "only", "max_attempts": 1}]}'));
SELECT count(*) AS claimed FROM wf_claim('wf2_wait_lease', lease => '0.3 seconds');
SELECT clock_timestamp() AS t0 \gset
SELECT status, result, error LIKE 'worker lost: lease expired%' AS lease_expired
  FROM wf_wait_workflow(wf2_wf('wwl'), '60 seconds');
SELECT clock_timestamp() - :'t0' < interval '30 seconds' AS before_timeout;

-- Bad input: 42704 for what does not exist (a job id in another queue
-- included), 22023 for a negative timeout, 22004 for NULLs.
SELECT * FROM wf2_bad(ARRAY[
  $$* FROM wf_wait_job('wf2_wait', -1, '0')$$,
  $$* FROM wf_wait_job('wf2_elsewhere', wf2_job('wd'), '0')$$,
  $$* FROM wf_wait_workflow('00000000-0000-0000-0000-000000000000', '0')$$,
  $$* FROM wf_wait_job('wf2_wait', wf2_job('wd'), '-1 second')$$,
  $$* FROM wf_wait_workflow(wf2_wf('ww'), '-1 second')$$,
  $$* FROM wf_wait_job('wf2_wait', wf2_job('wd'), NULL)$$,
  $$* FROM wf_wait_job(NULL, wf2_job('wd'))$$,
  $$* FROM wf_wait_job('wf2_wait', NULL)$$,
  $$* FROM wf_wait_workflow(NULL)$$,
  $$* FROM wf_wait_workflow(wf2_wf('ww'), NULL)$$]);
-- 55000: a job enqueued, or a workflow submitted, or a job changed (here
-- retried) by the waiting transaction itself, unfinished: nothing could
-- finish it while we wait.
BEGIN;
SELECT wf2_reg('same_tx', wf_enqueue('wf2_wait', '"same transaction"'));
SELECT wf2_reg('same_tx_wf', wf_submit('{"queue": "wf2_wait", "steps": [{"name": "s"}]}'));
SELECT wf_retry('wf2_wait', wf2_job('wfl'));
SELECT * FROM wf2_bad(ARRAY[
  $$* FROM wf_wait_job('wf2_wait', wf2_job('same_tx'), '1 second')$$,
  $$* FROM wf_wait_job('wf2_wait', wf2_job('same_tx'), '0')$$,
  $$* FROM wf_wait_workflow(wf2_wf('same_tx_wf'), '1 second')$$,
  $$* FROM wf_wait_job('wf2_wait', wf2_job('wfl'), '1 second')$$]);
ROLLBACK;
SELECT status FROM wf.jobs WHERE id = wf2_job('wfl');

-- ===== 4. Signal with start; workflow keys =====
-- The first signal starts the workflow of the key; while it is active, the
-- same key gives the same workflow (the spec is not submitted again). The
-- signal is kept: a step that awaits the event later goes on at once.
SELECT wf2_reg('order1', wf_signal_with_start(
    '{"queue": "wf2_sws", "key": "wf2-order-1", "steps": [{"name": "approve"}]}',
    'wf2-approval:1', '{"n": 1}'));
SELECT wf_signal_with_start(
    '{"queue": "wf2_sws", "key": "wf2-order-1", "steps": [{"name": "approve"}, {"name": "extra"}]}',
    'wf2-approval:1', '{"n": 2}') = wf2_wf('order1') AS same_workflow;
SELECT wf2_jobs('wf2_sws') AS jobs;
SELECT name, payload FROM wf.event WHERE name = 'wf2-approval:1';
SELECT key, wf2_str(workflow_id::text) AS workflow FROM wf.workflow_key WHERE key LIKE 'wf2%';
SELECT key, child_of FROM wf.workflows WHERE workflow_id = wf2_wf('order1');
SELECT (wf2_doc(wf_workflow(wf2_wf('order1')))) -> 'key' AS doc_key;
-- wf_submit with the key: the same workflow, nothing submitted.
SELECT count(*) AS jobs_before FROM wf.job WHERE queue LIKE 'wf2\_sws%' \gset
SELECT * FROM wf2_quiet($$wf_submit('{"queue": "wf2_sws2", "key": "wf2-order-1",
                                      "steps": [{"name": "other"}]}') = wf2_wf('order1')$$) AS submit_same;
SELECT count(*) - :jobs_before AS jobs_added FROM wf.job WHERE queue LIKE 'wf2\_sws%';
-- The step awaits the event after it was signalled: 'pending', its payload
-- the last signal's.
SELECT wf2_reg('approve', id) FROM wf_claim('wf2_sws');
SELECT wf_await_event('wf2_sws', wf2_job('approve'), 1, 'wf2-approval:1');
SELECT attempt, events FROM wf_claim('wf2_sws');
-- A running step does not make the workflow inactive either.
SELECT wf_signal_with_start(
    '{"queue": "wf2_sws", "key": "wf2-order-1", "steps": [{"name": "approve"}]}',
    'wf2-approval:1') = wf2_wf('order1') AS still_same;
SELECT wf2_jobs('wf2_sws') AS jobs;
SELECT wf_complete('wf2_sws', wf2_job('approve'), 2, '"approved"');
-- Finished: the next start with the key is a new workflow, and the key
-- points to it.
SELECT wf2_reg('order1b', wf_signal_with_start(
    '{"queue": "wf2_sws", "key": "wf2-order-1", "steps": [{"name": "approve"}]}',
    'wf2-approval:1', '{"n": 3}'));
SELECT wf2_wf('order1b') <> wf2_wf('order1') AS new_workflow;
SELECT key, wf2_str(workflow_id::text) AS workflow FROM wf.workflow_key WHERE key LIKE 'wf2%';
SELECT wf2_str(workflow_id::text) AS workflow, status, key FROM wf.workflows
 WHERE workflow_id IN (wf2_wf('order1'), wf2_wf('order1b')) ORDER BY started_at;
-- wf_submit with a key starts a workflow too, once.
SELECT wf2_reg('keyed', wf_submit('{"queue": "wf2_sws", "key": "wf2-order-2", "steps": [{"name": "k"}]}'));
SELECT * FROM wf2_quiet($$wf_submit('{"queue": "wf2_sws", "key": "wf2-order-2",
                                      "steps": [{"name": "k"}]}') = wf2_wf('keyed')$$) AS submit_again;
SELECT wf2_jobs('wf2_sws') AS jobs;
-- Bad input: nothing started, nothing signalled.
SELECT * FROM wf2_bad(ARRAY[
  $$wf_signal_with_start('{"queue": "wf2_sws", "steps": [{"name": "a"}]}', 'wf2-e')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "", "steps": [{"name": "a"}]}', 'wf2-e')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": 7, "steps": [{"name": "a"}]}', 'wf2-e')$$,
  $$wf_signal_with_start(jsonb_build_object('queue', 'wf2_sws', 'key', repeat('k', 257), 'steps', '[{"name": "a"}]'::jsonb), 'wf2-e')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "wf2-new", "steps": []}', 'wf2-e')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "wf2-new", "steps": [{"name": "a", "after": ["a"]}]}', 'wf2-e')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "wf2-new", "steps": [{"name": "a"}]}', 'wf:x')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "wf2-new", "steps": [{"name": "a"}]}', '')$$,
  $$wf_signal_with_start('{"queue": "wf2_sws", "key": "wf2-new", "steps": [{"name": "a"}]}', NULL)$$,
  $$wf_signal_with_start(NULL, 'wf2-e')$$,
  $$wf_submit('{"queue": "wf2_sws", "key": "", "steps": [{"name": "a"}]}')$$,
  $$wf_submit('{"queue": "wf2_sws", "key": ["k"], "steps": [{"name": "a"}]}')$$]);
SELECT count(*) AS events FROM wf.event WHERE name = 'wf2-e';

-- ===== 5. Fan-out at run time: wf_complete_with_steps =====
-- split completes and adds m1 (after split), m2 (in another queue, after
-- nothing) and join (after m1, m2 and split), atomically. "queue" defaults
-- to the completing step's.
SELECT wf2_reg('fan', wf_submit('{"name": "fan", "queue": "wf2_fan", "steps": [{"name": "split"}, {"name": "side"}]}'));
SELECT wf2_reg('fan.' || step_name, id) FROM wf_claim('wf2_fan', max_jobs => 2) ORDER BY 1;
SELECT wf_complete_with_steps('wf2_fan', wf2_job('fan.split'), 1, '{"parts": 2}',
    '[{"name": "m1", "payload": 1, "after": ["split"]},
      {"name": "m2", "queue": "wf2_fan_b", "payload": 2},
      {"name": "join", "after": ["m1", "m2", "split"]}]');
SELECT step_name, queue, status, (SELECT string_agg(p.step_name, ',' ORDER BY p.step_name)
                                    FROM wf.job p WHERE p.id = ANY (j.depends_on)) AS after
  FROM wf.jobs j WHERE workflow_id = wf2_wf('fan') ORDER BY id;
SELECT steps FROM wf.workflow WHERE id = wf2_wf('fan');
SELECT steps, pending, blocked, running, done FROM wf.workflows WHERE workflow_id = wf2_wf('fan');
-- Inputs hold the results of done steps: m1 gets split's; join gets all three.
SELECT step_name, payload, inputs FROM wf_claim('wf2_fan');
SELECT step_name, payload, inputs FROM wf_claim('wf2_fan_b');
SELECT wf_complete('wf2_fan', wf2_step('fan', 'm1'), 1, '"m1 done"');
SELECT wf_complete('wf2_fan_b', wf2_step('fan', 'm2'), 1, '"m2 done"');
SELECT step_name, inputs FROM wf_claim('wf2_fan');
-- Steps added later may name steps that are done (m1), and the completing
-- one; "after" naming the running side is refused below.
SELECT wf_complete_with_steps('wf2_fan', wf2_step('fan', 'join'), 1, '"joined"',
    '[{"name": "report", "after": ["m1", "join", "m1"]}]');
SELECT step_name, inputs FROM wf_claim('wf2_fan');
SELECT wf_complete('wf2_fan', wf2_step('fan', 'report'), 1, '"reported"');
SELECT wf_complete('wf2_fan', wf2_job('fan.side'), 1, '"side done"');
-- The workflow's result: its final steps (split, m1, m2, join have steps
-- after them now).
SELECT * FROM wf_wait_workflow(wf2_wf('fan'));
SELECT jsonb_pretty(wf2_doc(wf_workflow(wf2_wf('fan')) -> 'counts')) AS counts;

-- Bad input, with the completing step still running afterwards: fs is
-- running, fs_side too (unfinished), fs_done done.
SELECT wf2_reg('fs', wf_submit('{"queue": "wf2_fs", "steps": [{"name": "fs"}, {"name": "fs_side"}, {"name": "fs_done"}, {"name": "fs_failed", "max_attempts": 1}]}'));
SELECT wf2_reg('fs.' || step_name, id) FROM wf_claim('wf2_fs', max_jobs => 4) ORDER BY 1;
SELECT wf_complete('wf2_fs', wf2_job('fs.fs_done'), 1, '"done"');
SELECT wf_fail('wf2_fs', wf2_job('fs.fs_failed'), 1, 'failed');
SELECT wf2_reg('plain', wf_enqueue('wf2_fs', '"plain job"'));
SELECT id = wf2_job('plain') AS claimed FROM wf_claim('wf2_fs');
SELECT * FROM wf2_bad(ARRAY[
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "after": ["fs_side"]}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "after": ["fs_failed"]}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "after": ["fs_done", "fs_side"]}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "fs_done"}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "fs"}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n"}, {"name": "n"}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "after": ["nope"]}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "after": ["n"]}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "bogus": 1}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n", "queue": "wf2_bad_ord"}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '{"name": "n"}')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '"n"')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '3')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', NULL)$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), NULL, '"r"', '[{"name": "n"}]')$$,
  $$wf_complete_with_steps('wf2_fs', wf2_job('plain'), 1, '"r"', '[{"name": "n"}]')$$]);
-- An empty array (a list found empty) adds nothing: the step just
-- completes. Rolled back, to keep the step for what follows.
BEGIN;
SELECT wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[]');
SELECT wf2_jobs('wf2_fs') AS jobs;
ROLLBACK;
-- A stale token: false, nothing changed.
SELECT * FROM wf2_quiet($$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 2, '"r"', '[{"name": "n"}]')$$) AS stale;
SELECT * FROM wf2_quiet($$wf_complete_with_steps('wf2_fs', wf2_job('fs.fs_done'), 1, '"r"', '[{"name": "n"}]')$$) AS finished_step;
SELECT wf2_jobs('wf2_fs') AS jobs;
-- A cancel was requested: the step ends cancelled, and no step is added.
SELECT wf_cancel('wf2_fs', wf2_job('fs.fs'));
SELECT wf_complete_with_steps('wf2_fs', wf2_job('fs.fs'), 1, '"r"', '[{"name": "n"}]');
SELECT wf2_jobs('wf2_fs') AS jobs;
SELECT steps FROM wf.workflow WHERE id = wf2_wf('fs');
SELECT wf_complete('wf2_fs', wf2_job('fs.fs_side'), 1), wf_complete('wf2_fs', wf2_job('plain'), 1);

-- Fan-out inside a child workflow: the added steps belong to the child
-- (child_of), and the child is finished only when they are: the parent
-- waits for them and gets their results.
SELECT wf2_reg('fp', wf_enqueue('wf2_fp', '"fan parent"'));
SELECT id = wf2_job('fp') AS claimed FROM wf_claim('wf2_fp');
SELECT wf2_reg('cfan', wf_start_child('wf2_fp', wf2_job('fp'), 1, 'cfan',
       '{"queue": "wf2_fc", "steps": [{"name": "csplit"}]}'));
SELECT wf_await_children('wf2_fp', wf2_job('fp'), 1);
SELECT wf2_reg('csplit', id) FROM wf_claim('wf2_fc');
SELECT wf_complete_with_steps('wf2_fc', wf2_job('csplit'), 1, '"split"',
       '[{"name": "cm", "after": ["csplit"]}]');
SELECT step_name, status, child_of = wf2_job('fp') AS child_of_fp
  FROM wf.jobs WHERE workflow_id = wf2_wf('cfan') ORDER BY id;
SELECT name, status, delivered FROM wf.child WHERE parent_id = wf2_job('fp');
SELECT status, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('fp');
SELECT wf2_reg('cm', id), inputs FROM wf_claim('wf2_fc');
SELECT wf_complete('wf2_fc', wf2_job('cm'), 1, '"cm done"');
SELECT name, status, delivered FROM wf.child WHERE parent_id = wf2_job('fp');
SELECT status, wf2_doc(events) AS events FROM wf.jobs WHERE id = wf2_job('fp');

-- ===== 6. Progress: wf_progress =====
SELECT wf2_reg('pw', wf_submit('{"queue": "wf2_prog", "steps": [{"name": "long"}]}'));
SELECT wf2_reg('pj', id) FROM wf_claim('wf2_prog');
SELECT progress FROM wf.jobs WHERE id = wf2_job('pj');
SELECT wf_progress('wf2_prog', wf2_job('pj'), 1, '{"done": 10, "of": 100}');
SELECT progress FROM wf.jobs WHERE id = wf2_job('pj');
-- The latest report replaces the earlier one; wf_workflow shows it too.
SELECT wf_progress('wf2_prog', wf2_job('pj'), 1, '{"done": 50, "of": 100}');
SELECT progress, wf_workflow(wf2_wf('pw')) -> 'steps' -> 0 -> 'progress' AS in_workflow
  FROM wf.jobs WHERE id = wf2_job('pj');
-- The largest report that fits (8192 bytes of jsonb), then one too large:
-- 54000, the last report kept.
SELECT wf2_reg('pbig', wf_enqueue('wf2_prog', '"big"'));
SELECT id = wf2_job('pbig') AS claimed FROM wf_claim('wf2_prog');
SELECT wf2_reg('fits', min(n)) FROM generate_series(8000, 8300) AS n
 WHERE pg_column_size(jsonb_build_object('b', repeat('x', n))) - 4 = 8192;
SELECT wf_progress('wf2_prog', wf2_job('pbig'), 1, jsonb_build_object('b', repeat('x', wf2_job('fits')::int)));
SELECT octet_length(progress ->> 'b') = wf2_job('fits') AS kept FROM wf.jobs WHERE id = wf2_job('pbig');
SELECT * FROM wf2_bad(ARRAY[
  $$wf_progress('wf2_prog', wf2_job('pbig'), 1, jsonb_build_object('b', repeat('x', wf2_job('fits')::int + 1)))$$,
  $$wf_progress('wf2_prog', wf2_job('pj'), 1, jsonb_build_object('blob', repeat('x', 9000)))$$,
  $$wf_progress('wf2_prog', wf2_job('pj'), 1, NULL)$$,
  $$wf_progress(NULL, wf2_job('pj'), 1, '{}')$$,
  $$wf_progress('wf2_prog', wf2_job('pj'), NULL, '{}')$$]);
DELETE FROM wf2_names WHERE name = 'fits';
SELECT progress FROM wf.jobs WHERE id = wf2_job('pj');
-- Stale tokens: false, nothing changed.
SELECT * FROM wf2_quiet($$wf_progress('wf2_prog', wf2_job('pj'), 2, '{"stale": true}')$$) AS wrong_attempt;
SELECT * FROM wf2_quiet($$wf_progress('wf2_other_q', wf2_job('pj'), 1, '{"stale": true}')$$) AS wrong_queue;
SELECT * FROM wf2_quiet($$wf_progress('wf2_prog', -1, 1, '{"stale": true}')$$) AS no_job;
-- After the attempt ends, its last report is kept in the job row.
SELECT wf_complete('wf2_prog', wf2_job('pj'), 1, '"finished"');
SELECT * FROM wf2_quiet($$wf_progress('wf2_prog', wf2_job('pj'), 1, '{"late": true}')$$) AS after_end;
SELECT status, progress, wf_workflow(wf2_wf('pw')) -> 'steps' -> 0 -> 'progress' AS in_workflow
  FROM wf.jobs WHERE id = wf2_job('pj');
-- Through a retry: the failed attempt's report stays until the next
-- attempt reports.
SELECT wf_progress('wf2_prog', wf2_job('pbig'), 1, '{"phase": "one"}');
SELECT wf_fail('wf2_prog', wf2_job('pbig'), 1, 'again', retry_in => '0');
SELECT status, progress FROM wf.jobs WHERE id = wf2_job('pbig');
SELECT id = wf2_job('pbig') AS claimed, attempt FROM wf_claim('wf2_prog');
SELECT progress FROM wf.jobs WHERE id = wf2_job('pbig');
SELECT wf_progress('wf2_prog', wf2_job('pbig'), 2, '{"phase": "two"}');
SELECT wf_fail('wf2_prog', wf2_job('pbig'), 2, 'for good', permanent => true);
SELECT status, progress FROM wf.jobs WHERE id = wf2_job('pbig');

-- ===== 7. Reserved event names =====
SELECT wf2_reg('ev', wf_enqueue('wf2_ev', '"awaits"'));
SELECT id = wf2_job('ev') AS claimed FROM wf_claim('wf2_ev');
SELECT * FROM wf2_bad(ARRAY[
  $$wf_signal('wf:children')$$,
  $$wf_signal('wf:child:fetch', '{"status": "done"}')$$,
  $$wf_signal('wf:')$$,
  $$wf_await_event('wf2_ev', wf2_job('ev'), 1, 'wf:children')$$,
  $$wf_await_event('wf2_ev', wf2_job('ev'), 1, 'wf:child:x', '1 minute')$$,
  $$wf_signal_with_start('{"queue": "wf2_ev", "key": "wf2-ev", "steps": [{"name": "a"}]}', 'wf:child:a')$$]);
SELECT status FROM wf.jobs WHERE id = wf2_job('ev');
-- Names that only look alike are ordinary events.
SELECT wf_signal('wf2:children'), wf_signal('wf2-wf:x');
SELECT wf_await_event('wf2_ev', wf2_job('ev'), 1, 'wf2:children');
SELECT wf_complete('wf2_ev', wf2_job('ev'), 2) AS stale_after_park;
SELECT count(*) FROM wf_claim('wf2_ev');
SELECT wf_complete('wf2_ev', wf2_job('ev'), 2);
DELETE FROM wf.event WHERE name IN ('wf2:children', 'wf2-wf:x');

-- ===== 8. Rights =====
-- A role without grants: 42501 from every new function (no EXECUTE).
CREATE ROLE wf2_nobody;
CREATE ROLE wf2_worker;
CREATE ROLE wf2_operator;
SELECT wf2_reg('rj', wf_enqueue('wf2_r.jobs', '"rights"'));
SELECT wf2_reg('rw', wf_submit('{"queue": "wf2_r.jobs", "steps": [{"name": "rs"}]}'));
SELECT wf2_reg('xj', wf_enqueue('wf2_x.jobs', '"other tenant"'));
SET ROLE wf2_nobody;
SELECT * FROM wf2_bad(ARRAY[
  $$wf_start_child('wf2_r.jobs', wf2_job('rj'), 1, 'c', '{"queue": "wf2_r.kid", "steps": [{"name": "a"}]}')$$,
  $$wf_await_children('wf2_r.jobs', wf2_job('rj'), 1)$$,
  $$wf_complete_with_steps('wf2_r.jobs', wf2_job('rj'), 1, '{}', '[{"name": "a"}]')$$,
  $$wf_progress('wf2_r.jobs', wf2_job('rj'), 1, '{}')$$,
  $$* FROM wf_wait_job('wf2_r.jobs', wf2_job('rj'), '0')$$,
  $$* FROM wf_wait_workflow(wf2_wf('rw'), '0')$$,
  $$wf_signal_with_start('{"queue": "wf2_r.jobs", "key": "wf2-r", "steps": [{"name": "a"}]}', 'wf2_r.ev')$$,
  $$count(*) FROM wf_claim('wf2_r.jobs', versions => ARRAY['a'])$$]);
RESET ROLE;
-- work on wf2_r.*: the worker's functions open, on those queues only; a
-- child or added steps also need produce on their queues.
SELECT wf_grant('wf2_worker', 'work', 'wf2_r.*');
SET ROLE wf2_worker;
SELECT count(*) AS claimed FROM wf_claim('wf2_r.jobs', max_jobs => 2);
SELECT wf_progress('wf2_r.jobs', wf2_job('rj'), 1, '{"worker": "progress"}');
SELECT * FROM wf2_bad(ARRAY[
  $$wf_start_child('wf2_r.jobs', wf2_job('rj'), 1, 'c', '{"queue": "wf2_r.kid", "steps": [{"name": "a"}]}')$$,
  $$wf_complete_with_steps('wf2_r.jobs', wf2_step('rw', 'rs'), 1, '{}', '[{"name": "a"}]')$$,
  $$wf_progress('wf2_x.jobs', wf2_job('xj'), 1, '{}')$$,
  $$wf_await_children('wf2_x.jobs', wf2_job('xj'), 1)$$,
  $$wf_start_child('wf2_x.jobs', wf2_job('xj'), 1, 'c', '{"queue": "wf2_r.kid", "steps": [{"name": "a"}]}')$$,
  $$wf_complete_with_steps('wf2_x.jobs', wf2_job('xj'), 1, '{}', '[{"name": "a"}]')$$,
  $$* FROM wf_wait_job('wf2_r.jobs', wf2_job('rj'), '0')$$]);
RESET ROLE;
SELECT wf_grant('wf2_worker', 'produce', 'wf2_r.*');
SET ROLE wf2_worker;
SELECT wf2_reg('rkid', wf_start_child('wf2_r.jobs', wf2_job('rj'), 1, 'c',
       '{"queue": "wf2_r.kid", "steps": [{"name": "a"}]}'));
SELECT * FROM wf2_bad(ARRAY[
  $$wf_start_child('wf2_r.jobs', wf2_job('rj'), 1, 'd', '{"queue": "wf2_x.kid", "steps": [{"name": "a"}]}')$$,
  $$wf_complete_with_steps('wf2_r.jobs', wf2_step('rw', 'rs'), 1, '{}', '[{"name": "a", "queue": "wf2_x.kid"}]')$$,
  $$* FROM wf_wait_job('wf2_x.jobs', wf2_job('xj'), '0')$$,
  $$wf_signal_with_start('{"queue": "wf2_r.jobs", "key": "wf2-r", "steps": [{"name": "a"}]}', 'wf2_r.ev')$$]);
SELECT wf_complete_with_steps('wf2_r.jobs', wf2_step('rw', 'rs'), 1, '{}', '[{"name": "a", "queue": "wf2_r.kid"}]');
SELECT wf_await_children('wf2_r.jobs', wf2_job('rj'), 1);
SELECT * FROM wf_wait_job('wf2_r.jobs', wf2_job('rj'), '0');
SELECT * FROM wf_wait_workflow(wf2_wf('rw'), '0');
SELECT queue, status FROM wf.jobs ORDER BY id;
RESET ROLE;
-- signal on the event opens wf_signal_with_start (with produce on its queues).
SELECT wf_grant('wf2_worker', 'signal', 'wf2_r.*');
SET ROLE wf2_worker;
SELECT wf2_reg('rsws', wf_signal_with_start('{"queue": "wf2_r.jobs", "key": "wf2-r", "steps": [{"name": "a"}]}', 'wf2_r.ev'));
SELECT * FROM wf2_bad(ARRAY[
  $$wf_signal_with_start('{"queue": "wf2_x.jobs", "key": "wf2-x", "steps": [{"name": "a"}]}', 'wf2_r.ev')$$,
  $$wf_signal_with_start('{"queue": "wf2_x.jobs", "key": "wf2-r", "steps": [{"name": "a"}]}', 'wf2_r.ev')$$]);
RESET ROLE;
-- operate opens the waits too.
SELECT wf_grant('wf2_operator', 'operate', 'wf2_r.*');
SET ROLE wf2_operator;
SELECT * FROM wf_wait_job('wf2_r.jobs', wf2_job('rj'), '0');
SELECT status FROM wf_wait_workflow(wf2_wf('rkid'), '0');
SELECT * FROM wf2_bad(ARRAY[$$* FROM wf_wait_job('wf2_x.jobs', wf2_job('xj'), '0')$$]);
RESET ROLE;
-- Holding produce and operate, then losing produce: operate still opens
-- the waits (EXECUTE on wf_wait_job and wf_wait_workflow stays), not
-- wf_enqueue.
SELECT wf_grant('wf2_operator', 'produce', 'wf2_r.*');
SELECT wf_revoke('wf2_operator', 'produce', 'wf2_r.*');
SELECT has_function_privilege('wf2_operator', 'wf_wait_job(text,bigint,interval)', 'EXECUTE')
       AS may_wait_job,
       has_function_privilege('wf2_operator', 'wf_wait_workflow(uuid,interval)', 'EXECUTE')
       AS may_wait_workflow,
       has_function_privilege('wf2_operator', 'wf_enqueue(text,jsonb,timestamptz,int,int,text,uuid,text,bigint[],text,text,text,interval,timestamptz,text)', 'EXECUTE')
       AS may_enqueue;
SET ROLE wf2_operator;
SELECT try_sql($$SELECT * FROM wf_wait_job('wf2_r.jobs', wf2_job('rj'), '0')$$) AS wait_job,
       try_sql($$SELECT * FROM wf_wait_workflow(wf2_wf('rkid'), '0')$$) AS wait_workflow;
-- wf.version_stats shows a role its queues only.
SELECT queue, version, pending, running, waiting FROM wf.version_stats ORDER BY queue, version;
RESET ROLE;
SELECT wf_revoke('wf2_worker', 'work', 'wf2_r.*'), wf_revoke('wf2_worker', 'produce', 'wf2_r.*'),
       wf_revoke('wf2_worker', 'signal', 'wf2_r.*'), wf_revoke('wf2_operator', 'operate', 'wf2_r.*');
DROP ROLE wf2_nobody, wf2_worker, wf2_operator;
