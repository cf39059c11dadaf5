-- Bad input: every call below must fail with a clear error and a proper
-- SQLSTATE (never XX000, never a crash) and change nothing.
-- Queues of this file: bad_*.

-- A fingerprint of everything a call could change: how many jobs and edges
-- there are, the queue settings, and every column of this file's jobs.
CREATE FUNCTION bad_state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' / ',
        (SELECT count(*) FROM wf.jobs),
        (SELECT count(*) FROM wf.dependency),
        -- (key_order_sweep is the worker's to clear, at any time)
        (SELECT md5(coalesce(string_agg((to_jsonb(c) - 'key_order_sweep')::text, ',' ORDER BY queue), ''))
           FROM wf.queue_config c),
        (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY queue, id), ''))
           FROM wf.job j WHERE queue LIKE 'bad%'))
$$;

-- Runs each call (the text after SELECT) in order: its error as
-- 'SQLSTATE: message' (or 'ok'), and whether the state is unchanged.
CREATE FUNCTION bad_calls(calls text[])
RETURNS TABLE (call text, error text, unchanged boolean) LANGUAGE plpgsql AS $$
DECLARE
    before text;
BEGIN
    FOREACH call IN ARRAY calls LOOP
        before := bad_state();
        error := try_sql('SELECT ' || call);
        unchanged := bad_state() = before;
        RETURN NEXT;
    END LOOP;
END
$$;

-- The jobs the calls address, by name (ids are not printed).
CREATE TABLE bad_ids (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION bad_id(name text) RETURNS bigint LANGUAGE sql AS
    $$SELECT id FROM bad_ids WHERE bad_ids.name = bad_id.name$$;
INSERT INTO bad_ids VALUES ('running', wf_enqueue('bad_q', '{"n": "running"}'));
INSERT INTO bad_ids VALUES ('pending', wf_enqueue('bad_q', '{"n": "pending"}', run_at => 'tomorrow'));
INSERT INTO bad_ids VALUES ('keyed', wf_enqueue('bad_q', '{"n": "keyed"}', idempotency_key => 'k1',
                                                run_at => 'tomorrow'));
SELECT count(*) FROM wf_claim('bad_q', lease => '1 hour');
-- A ready job: a claim that wrongly succeeds would take it.
INSERT INTO bad_ids VALUES ('ready', wf_enqueue('bad_q', '{"n": "ready"}'));
SELECT wf_configure_queue('bad_cfg', max_attempts => 3, lease => '1 minute', max_running => 2);
SELECT payload->>'n' AS job, status, attempt FROM wf.jobs WHERE queue = 'bad_q' ORDER BY id;
SELECT bad_state() AS before \gset

-- NULL where a value is required: 22004, for every function.
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue(NULL)$$,
  $$wf_enqueue(NULL, '{}')$$,
  $$wf_enqueue('bad_q', payload => NULL)$$,
  $$wf_enqueue('bad_q', priority => NULL)$$,
  $$wf_enqueue_batch(NULL, '[{}]')$$,
  $$wf_enqueue_batch('bad_q', NULL)$$,
  $$wf_claim(NULL)$$,
  $$wf_claim('bad_q', max_jobs => NULL)$$,
  $$wf_heartbeat(NULL, bad_id('running'), 1)$$,
  $$wf_heartbeat('bad_q', NULL, 1)$$,
  $$wf_heartbeat('bad_q', bad_id('running'), NULL)$$,
  $$wf_complete(NULL, bad_id('running'), 1)$$,
  $$wf_complete('bad_q', NULL, 1)$$,
  $$wf_complete('bad_q', bad_id('running'), NULL)$$,
  $$wf_fail(NULL, bad_id('running'), 1, 'e')$$,
  $$wf_fail('bad_q', NULL, 1, 'e')$$,
  $$wf_fail('bad_q', bad_id('running'), NULL, 'e')$$,
  $$wf_fail('bad_q', bad_id('running'), 1, NULL)$$,
  $$wf_fail('bad_q', bad_id('running'), 1, 'e', permanent => NULL)$$,
  $$wf_retry(NULL, bad_id('running'))$$,
  $$wf_retry('bad_q', NULL)$$,
  $$wf_cancel(NULL, bad_id('pending'))$$,
  $$wf_cancel('bad_q', NULL)$$,
  $$wf_configure_queue(NULL)$$,
  $$wf_configure_queue(NULL, max_attempts => 3)$$
]);

-- Queue names: not empty (22023), at most 128 bytes (54000), no control
-- characters (22023) -- the same rule in every function.
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('')$$,
  $$wf_enqueue_batch('', '[{}]')$$,
  $$wf_claim('')$$,
  $$wf_heartbeat('', bad_id('running'), 1)$$,
  $$wf_complete('', bad_id('running'), 1)$$,
  $$wf_fail('', bad_id('running'), 1, 'e')$$,
  $$wf_retry('', bad_id('running'))$$,
  $$wf_cancel('', bad_id('pending'))$$,
  $$wf_configure_queue('')$$,
  $$wf_enqueue(repeat('q', 129))$$,
  $$wf_enqueue(repeat('é', 65))$$,
  $$wf_enqueue_batch(repeat('q', 129), '[{}]')$$,
  $$wf_claim(repeat('q', 129))$$,
  $$wf_heartbeat(repeat('q', 129), bad_id('running'), 1)$$,
  $$wf_complete(repeat('q', 129), bad_id('running'), 1)$$,
  $$wf_fail(repeat('q', 129), bad_id('running'), 1, 'e')$$,
  $$wf_retry(repeat('q', 129), 1)$$,
  $$wf_cancel(repeat('q', 129), 1)$$,
  $$wf_configure_queue(repeat('q', 129))$$,
  $$wf_enqueue(E'bad\nq')$$,
  $$wf_claim(E'bad\tq')$$,
  $$wf_configure_queue(E'bad\x01q')$$
]);
-- 128 bytes is the limit, not beyond it.
SELECT count(*) AS claimed FROM wf_claim(repeat('q', 128));
SELECT count(*) AS claimed FROM wf_claim(repeat('é', 64));

-- Counts and sizes: max_attempts, max_jobs and max_running are positive
-- (22023); max_jobs is at most 10000 (54000).
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', max_attempts => 0)$$,
  $$wf_enqueue('bad_q', max_attempts => -1)$$,
  $$wf_claim('bad_q', max_jobs => 0)$$,
  $$wf_claim('bad_q', max_jobs => -5)$$,
  $$wf_claim('bad_q', max_jobs => 10001)$$,
  $$wf_claim('bad_q', max_jobs => 2147483647)$$,
  $$wf_configure_queue('bad_cfg', max_attempts => 0)$$,
  $$wf_configure_queue('bad_cfg', max_attempts => -3)$$,
  $$wf_configure_queue('bad_cfg', max_running => -1)$$
]);
SELECT count(*) AS claimed FROM wf_claim('bad_empty', max_jobs => 10000);

-- Intervals: a lease, an extension and a backoff are positive; a wait and
-- a retry_in are not negative (22023).
SELECT * FROM bad_calls(ARRAY[
  $$wf_claim('bad_q', lease => '0')$$,
  $$wf_claim('bad_q', lease => '-1 second')$$,
  $$wf_claim('bad_q', lease => '1 day -25 hours')$$,
  $$wf_claim('bad_q', wait => '-1 second')$$,
  $$wf_claim('bad_q', wait => '-1 month')$$,
  $$wf_heartbeat('bad_q', bad_id('running'), 1, extend => '0')$$,
  $$wf_heartbeat('bad_q', bad_id('running'), 1, extend => '-1 minute')$$,
  $$wf_fail('bad_q', bad_id('running'), 1, 'e', retry_in => '-1 second')$$,
  $$wf_configure_queue('bad_cfg', backoff_base => '0')$$,
  $$wf_configure_queue('bad_cfg', backoff_base => '-1 second')$$,
  $$wf_configure_queue('bad_cfg', backoff_max => '0')$$,
  $$wf_configure_queue('bad_cfg', backoff_max => '-1 hour')$$,
  $$wf_configure_queue('bad_cfg', lease => '-1 second')$$,
  $$wf_configure_queue('bad_cfg', backoff_base => '2 hours')$$,
  $$wf_configure_queue('bad_cfg', backoff_base => '1 minute', backoff_max => '59 seconds')$$
]);

-- Intervals are at most 100 years (22023): a longer one overflowed a time
-- computed from it later, so that, say, every claim of a queue configured
-- with such a lease failed with 22008, or every wf_fail with such a backoff.
SELECT * FROM bad_calls(ARRAY[
  $$wf_configure_queue('bad_cfg', lease => '100000000 years')$$,
  $$wf_configure_queue('bad_cfg', backoff_base => '100000000 years')$$,
  $$wf_configure_queue('bad_cfg', backoff_max => '101 years')$$,
  $$wf_claim('bad_q', lease => '178000000 years')$$,
  $$wf_claim('bad_q', wait => '1000 years')$$,
  $$wf_heartbeat('bad_q', bad_id('running'), 1, extend => '1000 years')$$,
  $$wf_fail('bad_q', bad_id('running'), 1, 'e', retry_in => '1000 years')$$,
  $$wf_snooze('bad_q', bad_id('running'), 1, '1000 years')$$,
  $$wf_await_event('bad_q', bad_id('running'), 1, 'bad_ev', timeout => '1000 years')$$
]);

-- A budget of attempts is at most 1,000,000 (22023): parking and retrying a
-- job add to it, and INT_MAX made them overflow (22003).
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', '{}', max_attempts => 2147483647)$$,
  $$wf_configure_queue('bad_cfg', max_attempts => 1000001)$$
]);

-- Idempotency keys of cron ticks are pg_wf's own (22023): a job that took
-- one first would replace the tick's job, or stall the worker's cron pass.
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', '{}', idempotency_key => 'schedule:nightly:1764547200')$$
]);

-- Batches: a JSON array or nothing (22023).
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue_batch('bad_q', '{"n": 1}')$$,
  $$wf_enqueue_batch('bad_q', '"[1, 2]"')$$,
  $$wf_enqueue_batch('bad_q', '42')$$,
  $$wf_enqueue_batch('bad_q', 'true')$$,
  $$wf_enqueue_batch('bad_q', 'null')$$
]);

-- Dependencies: no NULL inside (22004), only jobs that exist (23503).
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', depends_on => ARRAY[NULL]::bigint[])$$,
  $$wf_enqueue('bad_q', depends_on => ARRAY[bad_id('pending'), NULL])$$,
  $$wf_enqueue('bad_q', depends_on => ARRAY[9000000000000])$$,
  $$wf_enqueue('bad_q', depends_on => ARRAY[bad_id('pending'), -1])$$
]);

-- Labels: an idempotency key, a step name and a worker name are not empty
-- (22023) and not over their limits of 512, 256 and 256 bytes (54000).
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', idempotency_key => '')$$,
  $$wf_enqueue('bad_q', idempotency_key => repeat('k', 513))$$,
  $$wf_enqueue('bad_q', step_name => '')$$,
  $$wf_enqueue('bad_q', step_name => repeat('s', 257))$$,
  $$wf_claim('bad_q', worker => '')$$,
  $$wf_claim('bad_q', worker => repeat('w', 257))$$
]);

-- An idempotency key taken with another payload (23505); the hint says
-- what to do.
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', '{"n": "other"}', idempotency_key => 'k1')$$,
  $$wf_enqueue('bad_q', '{"n": "keyed", "x": 1}', idempotency_key => 'k1')$$
]);
SELECT try_sql($$SELECT wf_enqueue('bad_q', '{"n": "other"}', idempotency_key => 'k1')$$,
               with_detail => true) ~ 'Use a new key' AS has_hint;

-- Sizes against wf.max_payload_size (54000): payloads, batch elements,
-- results and error texts.
SET wf.max_payload_size = '1kB';
SHOW wf.max_payload_size;
SELECT * FROM bad_calls(ARRAY[
  $$wf_enqueue('bad_q', jsonb_build_object('data', repeat('x', 2000)))$$,
  $$wf_enqueue('bad_q', to_jsonb(repeat('x', 2000)))$$,
  $$wf_enqueue_batch('bad_q', jsonb_build_array('{}'::jsonb, jsonb_build_object('data', repeat('x', 2000))))$$,
  $$wf_enqueue_batch('bad_q', jsonb_build_array(1, repeat('x', 2000)))$$,
  $$wf_complete('bad_q', bad_id('running'), 1, jsonb_build_object('data', repeat('x', 2000)))$$,
  $$wf_fail('bad_q', bad_id('running'), 1, repeat('e', 2000))$$
]);
SELECT try_sql($$SELECT wf_enqueue('bad_q', jsonb_build_object('data', repeat('x', 2000)))$$,
               with_detail => true);
RESET wf.max_payload_size;

-- Extreme values: errors with a proper SQLSTATE (not XX000), nothing changed.
SELECT call, error !~ '^XX' AS clean_error, unchanged FROM bad_calls(ARRAY[
  $$wf_claim('bad_q', lease => '300000 years')$$,
  $$wf_fail('bad_q', bad_id('running'), 1, 'e', retry_in => '300000 years')$$
]);

-- Calls that address nothing are no error: false or NULL, nothing changed.
SELECT * FROM bad_calls(ARRAY[
  $$wf_heartbeat('bad_q', -9223372036854775808, 1)$$,
  $$wf_heartbeat('bad_q', bad_id('running'), -2147483648)$$,
  $$wf_complete('bad_q', 9223372036854775807, 2147483647)$$,
  $$wf_fail('bad_q', 0, 0, 'e')$$,
  $$wf_retry('bad_q', 0)$$,
  $$wf_cancel('bad_q', 0)$$,
  $$wf_claim('bad_unknown', max_jobs => 10000, wait => '0')$$,
  $$wf_enqueue('bad_q', '{"n": "keyed"}', idempotency_key => 'k1')$$
]);

-- pg_wf on Citus, on a server without Citus (test/citus/ runs it on one).
SELECT * FROM bad_calls(ARRAY[
  $$wf_distribute()$$,
  $$wf._take_id_range()$$
]);

-- After all of that: nothing changed, and the jobs still work.
SELECT bad_state() = :'before' AS unchanged;
SELECT payload->>'n' AS job, status, attempt FROM wf.jobs WHERE queue = 'bad_q' ORDER BY id;
SELECT wf_heartbeat('bad_q', bad_id('running'), 1) AS mine;
SELECT wf_complete('bad_q', bad_id('running'), 1, '{"ok": true}') AS completed;
SELECT wf_cancel('bad_q', bad_id('pending')) AS cancelled;
SELECT queue, blocked, pending, running, waiting, done, failed, cancelled,
       oldest_ready_age IS NOT NULL AS has_ready
  FROM wf.queue_stats WHERE queue = 'bad_q';
