-- Flow control (schema 1.5): the flow settings of wf_configure_queue (rate
-- limits for the queue and per key, per-key concurrency, fair rotation,
-- ordered groups, max_run_time); a job's key (wf_enqueue, wf_enqueue_batch,
-- wf_submit), dedup windows (keep / replace), max_run_time and start_by;
-- wf.key_stats and wf.queue_stats.rate_left. Every bad input with its
-- SQLSTATE, and with proof that it changed nothing.
-- Queues of this file: fc_*. Ids and timestamps are never printed: jobs are
-- named by their payload, or compared with ids kept by \gset.
-- Time: one pg_sleep(1.2) (section 9), one claim waiting 100 ms, and a
-- database created and dropped (section 10).

-- A fingerprint of everything of this file a call could change: its queue
-- settings, its jobs (every column), ready rows, dedup windows and ordered
-- groups. (Only fc_* queues: the background worker may still change the
-- jobs of earlier files.)
CREATE FUNCTION fc_state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' / ',
        -- (key_order_sweep is the worker's to clear, at any time)
        (SELECT md5(coalesce(string_agg((to_jsonb(c) - 'key_order_sweep')::text, ',' ORDER BY queue), ''))
           FROM wf.queue_config c WHERE queue LIKE 'fc\_%'),
        (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY queue, id), ''))
           FROM wf.job j WHERE queue LIKE 'fc\_%'),
        (SELECT count(*) FROM wf.ready WHERE queue LIKE 'fc\_%'),
        (SELECT md5(coalesce(string_agg(d::text, ',' ORDER BY queue, dedup_key), ''))
           FROM wf.dedup d WHERE queue LIKE 'fc\_%'),
        (SELECT md5(coalesce(string_agg(g::text, ',' ORDER BY queue, key), ''))
           FROM wf.ordered_group g WHERE queue LIKE 'fc\_%'))
$$;

-- Runs each call (the text after SELECT) in order: its error as
-- 'SQLSTATE: message' (or 'ok'), and whether fc_state() is unchanged.
CREATE FUNCTION fc_bad(calls text[])
RETURNS TABLE (call text, error text, unchanged boolean) LANGUAGE plpgsql AS $$
DECLARE
    before text;
BEGIN
    FOREACH call IN ARRAY calls LOOP
        before := fc_state();
        error := try_sql('SELECT ' || call);
        unchanged := fc_state() = before;
        RETURN NEXT;
    END LOOP;
END
$$;

-- The flow settings of this file's queues.
CREATE VIEW fc_cfg AS
SELECT queue, rate_limit, rate_period, key_rate_limit, key_concurrency, fair, ordered,
       max_run_time
  FROM wf.queue_config WHERE queue LIKE 'fc\_%';

-- A claim's jobs by payload (a JSON string), in name order.
CREATE FUNCTION fc_claim(q text, n int DEFAULT 1) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(payload #>> '{}', ',' ORDER BY payload #>> '{}'), '-')
      FROM wf_claim(q, max_jobs => n)
$$;

-- The jobs of a queue, one line each: payload:status[:attempt>0].
CREATE FUNCTION fc_jobs(q text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg((payload #>> '{}') || ':' || status
                      || CASE WHEN attempt > 0 THEN ':' || attempt ELSE '' END, ', ' ORDER BY id)
      FROM wf.jobs WHERE queue = q
$$;

-- ===== 1. wf_configure_queue: the flow settings =====
-- Configured without them, a queue has none.
SELECT wf_configure_queue('fc_cfg');
SELECT * FROM fc_cfg ORDER BY queue;
-- Every one, in named notation.
SELECT wf_configure_queue('fc_cfg', rate_limit => 10, rate_period => '1 minute',
                          key_rate_limit => 2, key_concurrency => 3, fair => true,
                          max_run_time => '5 minutes');
SELECT * FROM fc_cfg ORDER BY queue;
-- NULL (or leaving an argument out) keeps each one.
SELECT wf_configure_queue('fc_cfg', max_attempts => 4);
SELECT wf_configure_queue('fc_cfg', rate_limit => NULL, rate_period => NULL,
                          key_rate_limit => NULL, key_concurrency => NULL, fair => NULL,
                          ordered => NULL, max_run_time => NULL);
SELECT c.*, q.max_attempts FROM fc_cfg c JOIN wf.queue_config q USING (queue) ORDER BY queue;
-- 0 removes a limit (and '0' the max_run_time); the others stay.
SELECT wf_configure_queue('fc_cfg', rate_limit => 0);
SELECT * FROM fc_cfg ORDER BY queue;
SELECT wf_configure_queue('fc_cfg', key_rate_limit => 0, key_concurrency => 0,
                          max_run_time => '0', fair => false);
SELECT * FROM fc_cfg ORDER BY queue;
-- Ordered, with key_concurrency 1 (the same thing) or none.
SELECT wf_configure_queue('fc_cfg', ordered => true, key_concurrency => 1);
SELECT * FROM fc_cfg ORDER BY queue;
SELECT wf_configure_queue('fc_cfg', key_concurrency => 3, ordered => false);

-- Bad settings: 22023, and nothing changes (neither fc_cfg, which has
-- key_concurrency 3, nor a new queue: fc_cfg_new is never created).
SELECT * FROM fc_bad(ARRAY[
  $$wf_configure_queue('fc_cfg', rate_limit => -1)$$,
  $$wf_configure_queue('fc_cfg', key_rate_limit => -1)$$,
  $$wf_configure_queue('fc_cfg', key_concurrency => -1)$$,
  $$wf_configure_queue('fc_cfg', rate_period => '0')$$,
  $$wf_configure_queue('fc_cfg', rate_period => '-1 second')$$,
  $$wf_configure_queue('fc_cfg', rate_limit => 5, rate_period => '0')$$,
  $$wf_configure_queue('fc_cfg', max_run_time => '-1 second')$$,
  $$wf_configure_queue('fc_cfg', ordered => true)$$,
  $$wf_configure_queue('fc_cfg_new', ordered => true, key_concurrency => 2)$$,
  $$wf_configure_queue('fc_cfg_new', rate_limit => -5, fair => true)$$]);
SELECT * FROM fc_cfg ORDER BY queue;
-- An ordered queue refuses key_concurrency above 1 later, too.
SELECT wf_configure_queue('fc_cfg_ord', ordered => true);
SELECT * FROM fc_bad(ARRAY[$$wf_configure_queue('fc_cfg_ord', key_concurrency => 2)$$]);
SELECT try_sql($$SELECT wf_configure_queue('fc_cfg_ord', key_concurrency => 2)$$, true);
-- (A rate limit without pg_wf in shared_preload_libraries is refused with
-- 55000; this suite's server preloads pg_wf, so that is not testable here.)

-- ===== 2. A job's key =====
-- wf_enqueue: key => text, shown by wf.jobs.
SELECT wf_enqueue('fc_key', '"k1"', key => 'tenant-1') AS k1 \gset
SELECT wf_enqueue('fc_key', '"k2"') AS k2 \gset
SELECT wf_enqueue('fc_key', '"k3"', key => repeat('k', 256)) AS k3 \gset
SELECT payload, key FROM wf.jobs WHERE id = :k1;
SELECT payload, key IS NULL AS no_key FROM wf.jobs WHERE id = :k2;
SELECT payload, octet_length(key) AS key_bytes FROM wf.jobs WHERE id = :k3;
-- wf_enqueue_batch: one key per payload, NULL for a job without one.
SELECT count(*) FROM wf_enqueue_batch('fc_key', '["b1", "b2", "b3"]', ARRAY['x', NULL, 'y']);
SELECT count(*) FROM wf_enqueue_batch('fc_key', '["b4"]', NULL);
SELECT payload #>> '{}' AS job, key FROM wf.jobs WHERE queue = 'fc_key' AND payload #>> '{}' LIKE 'b%'
 ORDER BY id;
-- wf_submit: a step's "key".
SELECT wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": "tenant-2"},
                  {"name": "b", "after": ["a"]}, {"name": "c", "key": null}]}') IS NOT NULL AS submitted;
SELECT step_name, key FROM wf.jobs WHERE queue = 'fc_key_wf' ORDER BY step_name;
-- Bad keys: 22023 (empty), 54000 (over 256 bytes), 22023 (keys not one per
-- payload, or not a flat array), 22023 (a step's key not a string);
-- nothing is created.
SELECT * FROM fc_bad(ARRAY[
  $$wf_enqueue('fc_key', key => '')$$,
  $$wf_enqueue('fc_key', key => repeat('k', 257))$$,
  $$wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY['a'])$$,
  $$wf_enqueue_batch('fc_key', '["x"]', ARRAY['a', 'b'])$$,
  $$wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY[]::text[])$$,
  $$wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY[['a'], ['b']])$$,
  $$wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY['a', ''])$$,
  $$wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY['a', repeat('k', 257)])$$,
  $$wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": 5}]}')$$,
  $$wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": ["x"]}]}')$$,
  $$wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": "k"}, {"name": "b", "key": true}]}')$$]);
SELECT try_sql($$SELECT wf_enqueue_batch('fc_key', '["x", "y"]', ARRAY['a'])$$, true);
SELECT try_sql($$SELECT wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": 5}]}')$$, true);
-- An empty step key is refused too (22023). Only the SQLSTATE is shown: the
-- message names the step twice ('"key" of step 1 must not be empty in step
-- "a"'), reported for a fix.
SELECT left(try_sql($$SELECT wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "key": ""}]}')$$), 6)
       AS empty_step_key;

-- ===== 3. key_concurrency: at most K running jobs per key =====
-- Jobs without a key are not limited.
SELECT wf_configure_queue('fc_kc', key_concurrency => 2);
SELECT count(*) FROM wf_enqueue_batch('fc_kc', '["a1", "a2", "a3", "b1", "b2", "n1", "n2"]',
                                      ARRAY['a', 'a', 'a', 'b', 'b', NULL, NULL]);
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT key, ready, running, key_concurrency, rate_left, head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_kc' ORDER BY key;
-- A completion makes room for one more of its key.
SELECT id AS a1 FROM wf.jobs WHERE queue = 'fc_kc' AND payload = '"a1"' \gset
SELECT wf_complete('fc_kc', :a1, 1) AS completed;
SELECT key, ready, running, throttled FROM wf.key_stats WHERE queue = 'fc_kc' ORDER BY key;
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT fc_jobs('fc_kc') AS jobs;
-- A failure (retried at once) makes room as well: b3 runs (first in line,
-- the retried b1 is due later). A higher limit lets more run: b1.
SELECT count(*) FROM wf_enqueue_batch('fc_kc', '["b3"]', ARRAY['b']);
SELECT id AS b1 FROM wf.jobs WHERE queue = 'fc_kc' AND payload = '"b1"' \gset
SELECT wf_fail('fc_kc', :b1, 1, 'again', retry_in => '0') AS failed;
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT wf_configure_queue('fc_kc', key_concurrency => 3);
SELECT fc_claim('fc_kc', 10) AS claimed;
SELECT fc_jobs('fc_kc') AS jobs;

-- ===== 4. fair: claims rotate over keys =====
-- One job per key per turn, keys in order, the jobs without a key last in
-- the rotation; within a key, priority order (a2 before a1). The rotation
-- goes on from claim to claim (it is kept per session).
SELECT wf_configure_queue('fc_fair', fair => true);
SELECT count(*) FROM wf_enqueue_batch('fc_fair', '["b1", "b2", "b3"]', ARRAY['b', 'b', 'b']);
SELECT wf_enqueue('fc_fair', '"a1"', key => 'a') IS NOT NULL AS a1;
SELECT wf_enqueue('fc_fair', '"a2"', key => 'a', priority => 5) IS NOT NULL AS a2;
SELECT wf_enqueue('fc_fair', '"n1"') IS NOT NULL AS n1;
SELECT wf_enqueue('fc_fair', '"c1"', key => 'c') IS NOT NULL AS c1;
SELECT wf_enqueue('fc_fair', '"n2"') IS NOT NULL AS n2;
SELECT count(*) FROM wf_enqueue_batch('fc_fair', '["b4", "b5"]', ARRAY['b', 'b']);
-- a, b, c: one each.
SELECT fc_claim('fc_fair', 3) AS claimed;
-- Then the group without a key; a and b again; c has nothing left, so the
-- group without a key again.
SELECT fc_claim('fc_fair') AS claimed;
SELECT fc_claim('fc_fair') AS claimed;
SELECT fc_claim('fc_fair') AS claimed;
SELECT fc_claim('fc_fair') AS claimed;
-- a and the jobs without a key are all claimed: b.
SELECT fc_claim('fc_fair') AS claimed;
-- b alone is left: it gives the rest at once.
SELECT fc_claim('fc_fair', 10) AS claimed;
SELECT fc_claim('fc_fair', 10) AS claimed;
-- A claim whose turn starts over at the first key (the rotation stood at
-- the group without a key) still goes round every key.
SELECT wf_configure_queue('fc_fair2', fair => true);
SELECT count(*) FROM wf_enqueue_batch('fc_fair2', '["a1", "b1", "n1"]', ARRAY['a', 'b', NULL]);
SELECT fc_claim('fc_fair2', 10) AS claimed;
SELECT count(*) FROM wf_enqueue_batch('fc_fair2', '["a2", "b2"]', ARRAY['a', 'b']);
SELECT fc_claim('fc_fair2', 10) AS claimed;
-- Nothing held back: key_stats lists the keys running, throttled NULL.
SELECT key, ready, running, key_concurrency, rate_left, head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_fair' ORDER BY key;

-- ===== 5. ordered: one job per key, in enqueue order =====
SELECT wf_configure_queue('fc_ord', ordered => true, max_attempts => 1);
-- Every job of an ordered queue needs a key: 22023, nothing created.
SELECT * FROM fc_bad(ARRAY[
  $$wf_enqueue('fc_ord', '"x"')$$,
  $$wf_enqueue_batch('fc_ord', '["x", "y"]')$$,
  $$wf_enqueue_batch('fc_ord', '["x", "y"]', ARRAY['a', NULL])$$,
  $$wf_submit('{"queue": "fc_ord", "steps": [{"name": "a", "key": "a"}, {"name": "b"}]}')$$,
  $$wf_submit('{"queue": "fc_key_wf", "steps": [{"name": "a", "queue": "fc_ord"}]}')$$]);
SELECT try_sql($$SELECT wf_enqueue('fc_ord', '"x"')$$, true);
SELECT try_sql($$SELECT wf_submit('{"queue": "fc_ord", "steps": [{"name": "a", "key": "a"}, {"name": "b"}]}')$$, true);
SELECT wf_enqueue('fc_ord', '"a1"', key => 'a') AS a1 \gset
SELECT wf_enqueue('fc_ord', '"b1"', key => 'b') AS b1 \gset
SELECT wf_enqueue('fc_ord', '"a2"', key => 'a') AS a2 \gset
SELECT wf_enqueue('fc_ord', '"a3"', key => 'a') AS a3 \gset
SELECT wf_enqueue('fc_ord', '"b2"', key => 'b', priority => 9) AS b2 \gset
SELECT wf_enqueue('fc_ord', '"a4"', key => 'a') AS a4 \gset
-- Only the heads run (b2's priority does not put it first).
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT key, ready, running, key_concurrency, rate_left,
       CASE head WHEN :a1 THEN 'a1' WHEN :b1 THEN 'b1' END AS head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_ord' ORDER BY key;
-- A completion makes the next job the head.
SELECT wf_complete('fc_ord', :a1, 1) AS completed;
SELECT fc_claim('fc_ord', 10) AS claimed;
-- wf_cancel of a later job removes it from the line: a3 never runs, a4
-- comes after a2.
SELECT wf_cancel('fc_ord', :a3) AS cancelled;
SELECT wf_complete('fc_ord', :a2, 1) AS completed;
SELECT fc_claim('fc_ord', 10) AS claimed;
-- A failed head blocks its group.
SELECT wf_fail('fc_ord', :b1, 1, 'boom') AS status;
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT key, ready, running,
       CASE head WHEN :b1 THEN 'b1' WHEN :a4 THEN 'a4' END AS head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_ord' ORDER BY key;
-- wf_retry runs the head again (not b2).
SELECT wf_retry('fc_ord', :b1) AS retried;
SELECT key, ready, running, CASE head WHEN :b1 THEN 'b1' END AS head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_ord' AND key = 'b';
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT wf_fail('fc_ord', :b1, 2, 'boom again') AS status;
SELECT fc_claim('fc_ord', 10) AS claimed;
-- wf_cancel gives the failed head up: the next job, b2, is the head.
SELECT wf_cancel('fc_ord', :b1) AS cancelled;
SELECT status, attempt, last_error FROM wf.jobs WHERE id = :b1;
SELECT key, ready, running, CASE head WHEN :b2 THEN 'b2' END AS head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_ord' AND key = 'b';
SELECT fc_claim('fc_ord', 10) AS claimed;
SELECT wf_complete('fc_ord', :a4, 1) AS a4_done, wf_complete('fc_ord', :b2, 1) AS b2_done;
SELECT fc_jobs('fc_ord') AS jobs;
SELECT count(*) AS keys FROM wf.key_stats WHERE queue = 'fc_ord';

-- What else holds a group back: a head waiting for an event, blocked on a
-- dependency, scheduled later or backing off. The jobs behind it wait.
SELECT wf_configure_queue('fc_ord2', ordered => true, max_attempts => 3);
SELECT wf_enqueue('fc_ord2_dep', '"dep"') AS dep \gset
SELECT wf_enqueue('fc_ord2', '"w1"', key => 'w') AS w1 \gset
SELECT wf_enqueue('fc_ord2', '"w2"', key => 'w') AS w2 \gset
SELECT wf_enqueue('fc_ord2', '"d1"', key => 'd', depends_on => ARRAY[:dep]) AS d1 \gset
SELECT wf_enqueue('fc_ord2', '"d2"', key => 'd') AS d2 \gset
SELECT wf_enqueue('fc_ord2', '"s1"', key => 's', run_at => now() + interval '1 hour') AS s1 \gset
SELECT wf_enqueue('fc_ord2', '"s2"', key => 's') AS s2 \gset
SELECT wf_enqueue('fc_ord2', '"r1"', key => 'r') AS r1 \gset
SELECT wf_enqueue('fc_ord2', '"r2"', key => 'r') AS r2 \gset
SELECT fc_claim('fc_ord2', 10) AS claimed;
SELECT wf_await_event('fc_ord2', :w1, 1, 'fc_ord2_event') AS w1_status;
SELECT wf_fail('fc_ord2', :r1, 1, 'later', retry_in => '1 hour') AS r1_status;
SELECT fc_claim('fc_ord2', 10) AS claimed;
-- Keys s and r: their heads are not due, so nothing of theirs is claimed.
SELECT key, ready, running,
       CASE head WHEN :w1 THEN 'w1' WHEN :d1 THEN 'd1' WHEN :s1 THEN 's1' WHEN :r1 THEN 'r1' END
         AS head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_ord2' ORDER BY key;
-- The event comes: w1 runs again, before w2.
SELECT wf_signal('fc_ord2_event') >= 0 AS signalled;
SELECT fc_claim('fc_ord2', 10) AS claimed;
-- The dependency is done: d1 runs, before d2.
SELECT count(*) FROM wf_claim('fc_ord2_dep');
SELECT wf_complete('fc_ord2_dep', :dep, 1) AS completed;
SELECT fc_claim('fc_ord2', 10) AS claimed;
-- wf_cancel skips a head that is not due: s2 is next.
SELECT wf_cancel('fc_ord2', :s1) AS cancelled;
SELECT fc_claim('fc_ord2', 10) AS claimed;
SELECT fc_jobs('fc_ord2') AS jobs;

-- wf_submit's steps with keys line up in an ordered queue like enqueued jobs.
SELECT wf_configure_queue('fc_ord_wf', ordered => true);
SELECT wf_submit('{"queue": "fc_ord_wf", "steps": [{"name": "x1", "key": "x", "payload": "x1"},
                  {"name": "x2", "key": "x", "payload": "x2"}]}') IS NOT NULL AS submitted;
SELECT fc_claim('fc_ord_wf', 10) AS claimed;
SELECT fc_claim('fc_ord_wf', 10) AS claimed;
SELECT wf_complete('fc_ord_wf', id, attempt) AS completed FROM wf.jobs
 WHERE queue = 'fc_ord_wf' AND status = 'running';
SELECT fc_claim('fc_ord_wf', 10) AS claimed;

-- ===== 6. Rate limits =====
-- rate_limit 3 per hour: a claim takes what the window has left.
SELECT wf_configure_queue('fc_rate', rate_limit => 3, rate_period => '1 hour');
SELECT count(*) FROM wf_enqueue_batch('fc_rate', '["r1", "r2", "r3", "r4", "r5"]');
SELECT pending, running, rate_left FROM wf.queue_stats WHERE queue = 'fc_rate';
SELECT fc_claim('fc_rate', 2) AS claimed;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate';
SELECT fc_claim('fc_rate', 2) AS claimed;
SELECT pending, running, rate_left FROM wf.queue_stats WHERE queue = 'fc_rate';
SELECT fc_claim('fc_rate', 2) AS claimed;
-- A waiting claim sleeps until the window refills (an hour): after 100 ms
-- it returns nothing.
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS claimed FROM wf_claim('fc_rate', wait => '100 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '90 ms' AS waited;
-- A completion does not give budget back.
SELECT id AS r1 FROM wf.jobs WHERE queue = 'fc_rate' AND payload = '"r1"' \gset
SELECT wf_complete('fc_rate', :r1, 1) AS completed;
SELECT fc_claim('fc_rate', 2) AS claimed;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate';
-- Without the limit: claims go on, and rate_left is NULL.
SELECT wf_configure_queue('fc_rate', rate_limit => 0);
SELECT fc_claim('fc_rate', 10) AS claimed;
SELECT pending, running, done, rate_left FROM wf.queue_stats WHERE queue = 'fc_rate';

-- key_rate_limit 2 per hour, per key; jobs without a key are not limited.
SELECT wf_configure_queue('fc_krate', key_rate_limit => 2, rate_period => '1 hour');
SELECT count(*) FROM wf_enqueue_batch('fc_krate',
       '["a1", "a2", "a3", "b1", "b2", "b3", "n1", "n2", "n3"]',
       ARRAY['a', 'a', 'a', 'b', 'b', 'b', NULL, NULL, NULL]);
SELECT fc_claim('fc_krate', 3) AS claimed;
SELECT key, ready, running, rate_left, throttled FROM wf.key_stats
 WHERE queue = 'fc_krate' ORDER BY key;
SELECT fc_claim('fc_krate', 10) AS claimed;
SELECT key, ready, running, key_concurrency, rate_left, head, head_status, throttled
  FROM wf.key_stats WHERE queue = 'fc_krate' ORDER BY key;
SELECT fc_claim('fc_krate', 10) AS claimed;
-- The queue itself has no rate limit.
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_krate';
-- Both at once: the queue's limit (4) and each key's (2). The rotation
-- a, b, c, a stops at the queue's limit.
SELECT wf_configure_queue('fc_rate2', rate_limit => 4, key_rate_limit => 2,
                          rate_period => '1 hour');
SELECT count(*) FROM wf_enqueue_batch('fc_rate2', '["a1", "a2", "a3", "b1", "b2", "c1", "c2"]',
                                      ARRAY['a', 'a', 'a', 'b', 'b', 'c', 'c']);
SELECT fc_claim('fc_rate2', 10) AS claimed;
SELECT fc_claim('fc_rate2', 10) AS claimed;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate2';
SELECT key, rate_left, throttled FROM wf.key_stats WHERE queue = 'fc_rate2' ORDER BY key;

-- ===== 7. Dedup windows =====
-- keep: while the holder is active, the same dedup key returns it, and its
-- payload stays.
SELECT wf_enqueue('fc_dd', '{"v": 1}', dedup_key => 'd') AS d1 \gset
SELECT wf_enqueue('fc_dd', '{"v": 2}', dedup_key => 'd') = :d1 AS same_job;
SELECT wf_enqueue('fc_dd', '{"v": 3}', dedup_key => 'd', on_duplicate => 'keep') = :d1 AS same_job;
SELECT wf_enqueue('fc_dd', '{"v": 4}', dedup_key => 'd', on_duplicate => NULL) = :d1 AS same_job;
SELECT payload, dedup_key, status FROM wf.jobs WHERE queue = 'fc_dd' ORDER BY id;
-- Another dedup key, or the same key in another queue, is another window.
SELECT wf_enqueue('fc_dd', '{"v": 5}', dedup_key => 'e') <> :d1 AS other_key;
SELECT wf_enqueue('fc_dd_other', '{"v": 6}', dedup_key => 'd') <> :d1 AS other_queue;
-- replace: a holder still waiting in line takes the new payload and run_at.
SELECT wf_enqueue('fc_dd', '{"v": 7}', dedup_key => 'd', on_duplicate => 'replace',
                  run_at => now() + interval '1 hour') = :d1 AS same_job;
SELECT payload, run_at > now() + interval '59 minutes' AS in_an_hour FROM wf.jobs WHERE id = :d1;
-- (So it is not claimed now; the job of dedup key 'e' is.)
SELECT payload FROM wf_claim('fc_dd', max_jobs => 10);
-- run_at NULL: now.
SELECT wf_enqueue('fc_dd', '{"v": 8}', dedup_key => 'd', on_duplicate => 'replace') = :d1 AS same_job;
SELECT payload, run_at <= now() AS due_now FROM wf.jobs WHERE id = :d1;
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'fc_dd' AND dedup_key = 'd';
-- A running holder keeps the key for 'keep'...
SELECT id = :d1 AS d1, payload FROM wf_claim('fc_dd');
SELECT wf_enqueue('fc_dd', '{"v": 9}', dedup_key => 'd') = :d1 AS same_job;
-- ... but 'replace' cannot change it: a new job takes the key.
SELECT wf_enqueue('fc_dd', '{"v": 10}', dedup_key => 'd', on_duplicate => 'replace') AS d2 \gset
SELECT :d2 <> :d1 AS new_job;
SELECT wf_enqueue('fc_dd', '{"v": 11}', dedup_key => 'd') = :d2 AS returns_new_job;
SELECT id = :d1 AS d1, id = :d2 AS d2, payload, status FROM wf.jobs
 WHERE queue = 'fc_dd' AND dedup_key = 'd' ORDER BY id;
-- A finished holder (done, cancelled, failed) holds nothing: a new job.
SELECT wf_complete('fc_dd', :d1, 1) AS completed;
SELECT wf_cancel('fc_dd', :d2) AS cancelled;
SELECT wf_enqueue('fc_dd', '{"v": 12}', dedup_key => 'd', max_attempts => 1) AS d3 \gset
SELECT :d3 NOT IN (:d1, :d2) AS new_job;
SELECT count(*) FROM wf_claim('fc_dd', max_jobs => 10) WHERE id = :d3;
SELECT wf_fail('fc_dd', :d3, 1, 'no') AS status;
SELECT wf_enqueue('fc_dd', '{"v": 13}', dedup_key => 'd', on_duplicate => 'replace') AS d4 \gset
SELECT :d4 NOT IN (:d1, :d2, :d3) AS new_job;
SELECT id = :d4 AS d4, payload, status FROM wf.jobs
 WHERE queue = 'fc_dd' AND dedup_key = 'd' ORDER BY id;
-- A blocked holder (waiting for a dependency) has started in this sense:
-- 'keep' returns it, 'replace' creates a new job.
SELECT wf_enqueue('fc_dd2', '{"v": "parent"}') AS parent \gset
SELECT wf_enqueue('fc_dd2', '{"v": 1}', dedup_key => 'd', depends_on => ARRAY[:parent]) AS h \gset
SELECT wf_enqueue('fc_dd2', '{"v": 2}', dedup_key => 'd') = :h AS same_job;
SELECT wf_enqueue('fc_dd2', '{"v": 3}', dedup_key => 'd', on_duplicate => 'replace') <> :h AS new_job;
SELECT payload, status FROM wf.jobs WHERE queue = 'fc_dd2' AND dedup_key = 'd' ORDER BY id;
-- Bad input: 22023, nothing changes (the holder keeps its payload).
SELECT * FROM fc_bad(ARRAY[
  $$wf_enqueue('fc_dd', dedup_key => '')$$,
  $$wf_enqueue('fc_dd', dedup_key => repeat('d', 257))$$,
  $$wf_enqueue('fc_dd', dedup_key => 'd', on_duplicate => 'merge')$$,
  $$wf_enqueue('fc_dd', dedup_key => 'd', on_duplicate => 'REPLACE')$$,
  $$wf_enqueue('fc_dd', on_duplicate => 'replace')$$,
  $$wf_enqueue('fc_dd', dedup_key => 'd', on_duplicate => 'replace', max_run_time => '-1 s')$$]);
SELECT try_sql($$SELECT wf_enqueue('fc_dd', dedup_key => 'd', on_duplicate => 'merge')$$, true);
SELECT try_sql($$SELECT wf_enqueue('fc_dd', on_duplicate => 'replace')$$, true);

-- ===== 8. max_run_time and start_by: bad input =====
SELECT * FROM fc_bad(ARRAY[
  $$wf_enqueue('fc_mrt', max_run_time => '0')$$,
  $$wf_enqueue('fc_mrt', max_run_time => '-1 second')$$,
  $$wf_enqueue('fc_sb', start_by => now() - interval '1 second')$$,
  $$wf_enqueue('fc_sb', run_at => now() + interval '1 hour', start_by => now() + interval '59 minutes')$$,
  $$wf_enqueue('fc_sb', start_by => 'infinity')$$,
  $$wf_enqueue('fc_sb', start_by => '-infinity')$$]);
SELECT try_sql($$SELECT wf_enqueue('fc_sb', start_by => now() - interval '1 second')$$, true);
-- start_by may equal run_at (or now).
SELECT wf_enqueue('fc_sb_ok', run_at => now() + interval '1 hour',
                  start_by => now() + interval '1 hour') IS NOT NULL AS enqueued;
SELECT wf_enqueue('fc_sb_ok', start_by => now()) IS NOT NULL AS enqueued;
SELECT wf_cancel('fc_sb_ok', id) FROM wf.jobs WHERE queue = 'fc_sb_ok' ORDER BY id;

-- ===== 9. Deadlines and windows over time: set up, one sleep, checked =====
-- max_run_time: a claim's lease_expires_at is at most started_at +
-- max_run_time (the queue's, or the job's own, which wins).
SELECT wf_configure_queue('fc_mrt', max_run_time => '1 hour', lease => '2 hours');
SELECT wf_enqueue('fc_mrt', '"queue"') AS m1 \gset
SELECT lease_expires_at - now() BETWEEN interval '59 minutes' AND interval '61 minutes' AS capped
  FROM wf_claim('fc_mrt');
SELECT max_run_time, run_deadline - started_at AS run, lease_expires_at - started_at AS lease
  FROM wf.jobs WHERE id = :m1;
-- A heartbeat cannot extend it past the deadline either.
SELECT wf_heartbeat('fc_mrt', :m1, 1, extend => '3 hours') AS alive;
SELECT run_deadline - started_at AS run, lease_expires_at - started_at AS lease
  FROM wf.jobs WHERE id = :m1;
-- Without a lease, the deadline is the lease.
SELECT wf_configure_queue('fc_mrt_nolease', max_run_time => '10 minutes');
SELECT wf_enqueue('fc_mrt_nolease', '"x"') AS m0 \gset
SELECT count(*) FROM wf_claim('fc_mrt_nolease');
SELECT run_deadline - started_at AS run, lease_expires_at - started_at AS lease
  FROM wf.jobs WHERE id = :m0;
-- The job's own 500 ms: m2 will be retried, m3 (one attempt) will fail.
SELECT wf_enqueue('fc_mrt', '"job"', max_run_time => '500 ms') AS m2 \gset
SELECT wf_enqueue('fc_mrt', '"spent"', max_run_time => '500 ms', max_attempts => 1) AS m3 \gset
SELECT count(*) FROM wf_claim('fc_mrt', max_jobs => 10);
SELECT payload, max_run_time, run_deadline - started_at AS run, lease_expires_at - started_at AS lease
  FROM wf.jobs WHERE id IN (:m2, :m3) ORDER BY id;
SELECT wf_heartbeat('fc_mrt', :m2, 1) AS alive_before;

-- start_by: "late" will not have started by its deadline (and "child"
-- depends on it); "blocked" waits for a dependency until its deadline
-- passes; "ontime" is claimed in time; "later" has an hour left.
SELECT wf_enqueue('fc_sb', '"late"', start_by => now() + interval '500 ms') AS late \gset
SELECT wf_enqueue('fc_sb_child', '"child"', depends_on => ARRAY[:late]) AS child \gset
SELECT wf_enqueue('fc_sb_parent', '"parent"') AS sb_parent \gset
SELECT wf_enqueue('fc_sb', '"blocked"', depends_on => ARRAY[:sb_parent],
                  start_by => now() + interval '500 ms') AS blocked \gset
SELECT wf_enqueue('fc_sb_ontime', '"ontime"', start_by => now() + interval '500 ms') AS ontime \gset
SELECT wf_enqueue('fc_sb', '"later"', start_by => now() + interval '1 hour') AS later \gset
SELECT count(*) FROM wf_claim('fc_sb_ontime');
SELECT start_by IS NOT NULL AS has_start_by FROM wf.jobs WHERE id = :late;

-- The rate period defaults to 1 second: 1 claim per second here.
SELECT wf_configure_queue('fc_rate_default', rate_limit => 1);
SELECT rate_limit, rate_period FROM fc_cfg WHERE queue = 'fc_rate_default';
SELECT count(*) FROM wf_enqueue_batch('fc_rate_default', '["x1", "x2"]');
SELECT fc_claim('fc_rate_default', 2) AS claimed;
SELECT fc_claim('fc_rate_default', 2) AS claimed;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate_default';

SELECT pg_sleep(1.2);

-- The window has room again.
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate_default';
SELECT fc_claim('fc_rate_default', 2) AS claimed;

-- Past its max_run_time the attempt is taken back, though it heartbeats:
-- its token is stale, m2 is pending again with the error, m3 failed.
SELECT wf_heartbeat('fc_mrt', :m2, 1) AS alive_after;
SELECT wf_sweep() >= 0 AS swept;
-- (The time in the message is in seconds, whoever sweeps: the background
-- worker or this session, whose IntervalStyle pg_regress sets apart.)
SELECT payload, status, attempt, finished_at IS NOT NULL AS finished, last_error
  FROM wf.jobs WHERE id IN (:m2, :m3) ORDER BY id;
SELECT wf_complete('fc_mrt', :m2, 1) AS stale_complete;
SELECT status, attempt FROM wf.jobs WHERE id = :m2;
-- The next attempt runs, and may complete.
SELECT id = :m2 AS m2, attempt FROM wf_claim('fc_mrt');
SELECT wf_complete('fc_mrt', :m2, 2) AS completed;
-- m1's hour is not over.
SELECT status FROM wf.jobs WHERE id = :m1;

-- Not started by start_by: failed (blocked ones too), the dependent
-- cancelled; no claim starts it late. What started in time runs on.
SELECT fc_claim('fc_sb', 10) AS claimed;
SELECT wf_sweep() >= 0 AS swept;
SELECT payload, status, attempt, finished_at IS NOT NULL AS finished,
       regexp_replace(replace(last_error, :'late', '<late>'), '\(.*\)', '(<start_by>)') AS last_error
  FROM wf.jobs WHERE id IN (:late, :child, :blocked, :ontime, :later) ORDER BY id;
SELECT wf_complete('fc_sb_ontime', :ontime, 1) AS completed;

-- ===== 10. Rate windows belong to their database =====
-- A queue of the same name in another database has a window of its own.
SELECT wf_configure_queue('fc_rate_db', rate_limit => 2, rate_period => '1 hour');
SELECT count(*) FROM wf_enqueue_batch('fc_rate_db', '["x1", "x2", "x3"]');
SELECT fc_claim('fc_rate_db', 10) AS claimed;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate_db';
CREATE DATABASE fc_other_db;
\c fc_other_db
CREATE EXTENSION pg_wf;
SELECT wf_configure_queue('fc_rate_db', rate_limit => 2, rate_period => '1 hour');
SELECT count(*) FROM wf_enqueue_batch('fc_rate_db', '["y1", "y2", "y3"]');
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate_db';
SELECT string_agg(payload #>> '{}', ',' ORDER BY payload #>> '{}') AS claimed
  FROM wf_claim('fc_rate_db', max_jobs => 10);
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE fc_other_db WITH (FORCE);
RESET client_min_messages;
SELECT rate_left FROM wf.queue_stats WHERE queue = 'fc_rate_db';
SELECT fc_claim('fc_rate_db', 10) AS claimed;

-- ===== 11. The key order holds the ready rows of queues that claim by key =====
-- (1.10) Ready rows enqueued into a queue whose claims go in plain order stay
-- out of wf.ready_key_order (one index entry less per job); a queue that
-- claims key by key has its rows there from the start, and a queue that
-- begins to claim key by key has all of them put in, so that its first
-- claims see every job. Rows are left out only while a worker serves the
-- database (it puts in those of enqueues racing the change): waited for.
DO $$
DECLARE probe bigint; outside boolean;
BEGIN
  FOR i IN 1 .. 200 LOOP
    probe := wf_enqueue('fcprobe', '{}');
    SELECT NOT r.key_order INTO outside FROM wf.ready r WHERE r.queue = 'fcprobe' AND r.id = probe;
    PERFORM wf_cancel('fcprobe', probe);
    EXIT WHEN outside;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT wf_enqueue('fc_ko', '"k1"', key => 'a') > 0 AS enqueued;
SELECT wf_enqueue('fc_ko', '"k2"') > 0 AS enqueued;
SELECT count(*) FROM wf_enqueue_batch('fc_ko', '["k3", "k4"]', keys => ARRAY['b', NULL]);
SELECT wf_configure_queue('fc_ko_fair', fair => true);
SELECT count(*) FROM wf_enqueue_batch('fc_ko_fair', '["f1", "f2"]', keys => ARRAY['a', NULL]);
SELECT wf_enqueue('fc_ko_fair', '"f3"') > 0 AS enqueued;
CREATE VIEW fc_key_order AS
SELECT queue, key_order, count(*) FROM wf.ready WHERE queue LIKE 'fc\_ko%' GROUP BY 1, 2;
SELECT * FROM fc_key_order ORDER BY 1, 2;
-- Settings that keep the plain order move nothing.
SELECT wf_configure_queue('fc_ko', max_attempts => 3, rate_limit => 1000);
SELECT * FROM fc_key_order ORDER BY 1, 2;
SELECT wf_configure_queue('fc_ko', key_concurrency => 1);
SELECT * FROM fc_key_order ORDER BY 1, 2;
SELECT fc_claim('fc_ko', 10) AS claimed;
-- And back to plain claims: rows already in the key order stay there.
SELECT wf_configure_queue('fc_ko', key_concurrency => 0);
SELECT wf_enqueue('fc_ko', '"k5"') > 0 AS enqueued;
SELECT * FROM fc_key_order ORDER BY 1, 2;
-- Workflow steps too: wf_submit's first steps, and a step released by its
-- last parent's completion, stay out in a plain queue and go in for a fair
-- one. A release reads settings only from the completing session's cache (it
-- runs without SPI), filled by wf_submit and the claim just before; any
-- invalidation in between (a concurrent wf_configure_queue, an ANALYZE)
-- empties it and the row goes in, which is correct too: tried again then.
SELECT wf_configure_queue('fc_kw_fair', fair => true);
CREATE TEMP TABLE fc_kw_seen (root_in boolean, plain_in boolean, fair_in boolean);
DO $$
DECLARE w uuid; job record; root_in boolean; plain_in boolean; fair_in boolean;
BEGIN
  FOR i IN 1 .. 50 LOOP
    w := wf_submit('{"queue": "fc_kw", "steps": [{"name": "r"}, {"name": "p", "after": ["r"]},
                     {"name": "f", "queue": "fc_kw_fair", "after": ["r"]}]}');
    SELECT r.key_order INTO root_in FROM wf.ready r JOIN wf.job j USING (queue, id)
     WHERE j.workflow_id = w AND j.step_name = 'r';
    SELECT * INTO job FROM wf_claim('fc_kw');
    PERFORM wf_complete('fc_kw', job.id, job.attempt, '{}');
    SELECT r.key_order INTO plain_in FROM wf.ready r JOIN wf.job j USING (queue, id)
     WHERE j.workflow_id = w AND j.step_name = 'p';
    SELECT r.key_order INTO fair_in FROM wf.ready r JOIN wf.job j USING (queue, id)
     WHERE j.workflow_id = w AND j.step_name = 'f';
    EXIT WHEN NOT root_in AND NOT plain_in;
  END LOOP;
  INSERT INTO fc_kw_seen VALUES (root_in, plain_in, fair_in);
END $$;
SELECT * FROM fc_kw_seen;
-- A fair claim takes the released step.
SELECT step_name FROM wf_claim('fc_kw_fair');
