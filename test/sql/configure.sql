-- wf_configure_queue: per-queue defaults and limits; NULL keeps the current
-- value. Queues of this file: cfg_*.

CREATE VIEW cfg AS
SELECT queue, max_attempts, backoff_base, backoff_max, lease, max_running, paused
  FROM wf.queue_config WHERE queue LIKE 'cfg\_%';

-- A queue never configured uses the defaults: 5 attempts, no lease.
SELECT wf_enqueue('cfg_plain') AS j \gset
SELECT max_attempts FROM wf.jobs WHERE id = :j;
SELECT lease_expires_at FROM wf_claim('cfg_plain');
-- Configuring with no setting stores the defaults.
SELECT wf_configure_queue('cfg_a');
SELECT * FROM cfg ORDER BY queue;

-- Every setting, in named notation.
SELECT wf_configure_queue(queue => 'cfg_a', max_attempts => 3, backoff_base => '10 seconds',
                          backoff_max => '5 minutes', lease => '30 seconds',
                          max_running => 4, paused => true);
SELECT * FROM cfg ORDER BY queue;
-- NULL (or leaving an argument out) keeps the value.
SELECT wf_configure_queue('cfg_a', max_attempts => 7);
SELECT * FROM cfg ORDER BY queue;
SELECT wf_configure_queue('cfg_a', max_attempts => NULL, backoff_base => NULL, backoff_max => NULL,
                          lease => NULL, max_running => NULL, paused => NULL);
SELECT * FROM cfg ORDER BY queue;
SELECT wf_configure_queue('cfg_a', paused => false);
SELECT * FROM cfg ORDER BY queue;
-- A lease of zero removes the queue's lease.
SELECT wf_configure_queue('cfg_a', lease => '0');
SELECT * FROM cfg ORDER BY queue;
-- A base above the cap is refused, and nothing changes.
SELECT try_sql($$SELECT wf_configure_queue('cfg_a', backoff_base => '10 minutes')$$);
SELECT try_sql($$SELECT wf_configure_queue('cfg_a', backoff_max => '1 second')$$);
SELECT try_sql($$SELECT wf_configure_queue('cfg_new', backoff_base => '1 minute',
                                           backoff_max => '30 seconds')$$);
SELECT * FROM cfg ORDER BY queue;
-- Equal base and cap are fine; a base alone above the default cap raises it.
SELECT wf_configure_queue('cfg_b', backoff_base => '2 hours');
SELECT wf_configure_queue('cfg_c', backoff_base => '1 minute', backoff_max => '1 minute');
SELECT * FROM cfg ORDER BY queue;

-- max_attempts applies to jobs enqueued afterwards; an explicit argument wins.
SELECT wf_enqueue('cfg_attempts') AS before_cfg \gset
SELECT wf_configure_queue('cfg_attempts', max_attempts => 2);
SELECT wf_enqueue('cfg_attempts') AS after_cfg \gset
SELECT wf_enqueue('cfg_attempts', max_attempts => 9) AS explicit \gset
SELECT id = :before_cfg AS before_cfg, id = :after_cfg AS after_cfg, max_attempts
  FROM wf.jobs WHERE queue = 'cfg_attempts' ORDER BY id;
-- and to the retries of those jobs.
SELECT count(*) FROM wf_claim('cfg_attempts', max_jobs => 3);
SELECT wf_fail('cfg_attempts', :after_cfg, 1, 'e1', retry_in => '0') AS first;
SELECT attempt FROM wf_claim('cfg_attempts');
SELECT wf_fail('cfg_attempts', :after_cfg, 2, 'e2', retry_in => '0') AS second;

-- The queue's lease applies to every claim that does not name one.
SELECT wf_configure_queue('cfg_lease', lease => '10 minutes');
SELECT count(*) FROM wf_enqueue_batch('cfg_lease', '[1, 2]');
SELECT lease_expires_at BETWEEN now() + interval '9 minutes' AND now() + interval '11 minutes'
       AS queue_lease
  FROM wf_claim('cfg_lease');
SELECT lease_expires_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
       AS own_lease
  FROM wf_claim('cfg_lease', lease => '1 hour');
SELECT wf_configure_queue('cfg_lease', lease => '0');
SELECT wf_enqueue('cfg_lease') IS NOT NULL AS enqueued;
SELECT lease_expires_at FROM wf_claim('cfg_lease');

-- The queue's backoff: base doubling per attempt, capped, +-25% jitter.
-- (Each failure in a transaction of its own, so that now() is its time.)
SELECT wf_configure_queue('cfg_backoff', max_attempts => 10, backoff_base => '10 minutes',
                          backoff_max => '1 hour');
SELECT wf_enqueue('cfg_backoff') AS j \gset
SELECT attempt FROM wf_claim('cfg_backoff');
BEGIN;
SELECT wf_fail('cfg_backoff', :j, 1, 'e') AS status;
SELECT run_at - now() BETWEEN interval '7.5 minutes' AND interval '12.5 minutes' AS base
  FROM wf.jobs WHERE id = :j;
ROLLBACK;
-- (Rolled back, and failed again with retry_in => '0' to reach the next
-- attempt without waiting.)
SELECT wf_fail('cfg_backoff', :j, 1, 'e', retry_in => '0') AS status;
SELECT attempt FROM wf_claim('cfg_backoff');
BEGIN;
SELECT wf_fail('cfg_backoff', :j, 2, 'e') AS status;
SELECT run_at - now() BETWEEN interval '15 minutes' AND interval '25 minutes' AS doubled
  FROM wf.jobs WHERE id = :j;
ROLLBACK;
SELECT wf_fail('cfg_backoff', :j, 2, 'e', retry_in => '0') AS status;
SELECT attempt FROM wf_claim('cfg_backoff');
BEGIN;
SELECT wf_fail('cfg_backoff', :j, 3, 'e') AS status;
SELECT run_at - now() BETWEEN interval '30 minutes' AND interval '50 minutes' AS doubled_again
  FROM wf.jobs WHERE id = :j;
ROLLBACK;
SELECT wf_fail('cfg_backoff', :j, 3, 'e', retry_in => '0') AS status;
SELECT attempt FROM wf_claim('cfg_backoff');
BEGIN;
SELECT wf_fail('cfg_backoff', :j, 4, 'e') AS status;
SELECT run_at - now() BETWEEN interval '45 minutes' AND interval '75 minutes' AS capped
  FROM wf.jobs WHERE id = :j;
COMMIT;
-- Many attempts later the delay stays at the cap.
SELECT wf_configure_queue('cfg_backoff2', max_attempts => 100, backoff_base => '1 second',
                          backoff_max => '30 seconds');
SELECT wf_enqueue('cfg_backoff2') AS j \gset
DO $$
DECLARE
    j bigint := (SELECT id FROM wf.jobs WHERE queue = 'cfg_backoff2');
BEGIN
    FOR i IN 1..70 LOOP
        PERFORM 1 FROM wf_claim('cfg_backoff2');
        PERFORM wf_fail('cfg_backoff2', j, i, 'e', retry_in => '0');
    END LOOP;
END
$$;
SELECT attempt FROM wf_claim('cfg_backoff2');
BEGIN;
SELECT wf_fail('cfg_backoff2', :j, 71, 'e') AS status;
SELECT run_at - now() BETWEEN interval '22.5 seconds' AND interval '37.5 seconds' AS capped
  FROM wf.jobs WHERE id = :j;
COMMIT;

-- paused and max_running are covered in claim.sql: a paused queue holds its
-- jobs, unpaused it hands them out again.
SELECT wf_configure_queue('cfg_pause', paused => true);
SELECT wf_enqueue('cfg_pause', '{"n": 1}') IS NOT NULL AS enqueued;
SELECT count(*) AS claimed FROM wf_claim('cfg_pause');
SELECT wf_configure_queue('cfg_pause', paused => false);
SELECT payload FROM wf_claim('cfg_pause');

-- max_running => 0 removes the limit (1.6), as 0 removes flow control's;
-- wf.queue_stats shows the settings to any reader of the queue.
SELECT wf_configure_queue('cfg_mr', max_running => 3, paused => true);
SELECT paused, max_running, max_attempts FROM wf.queue_stats WHERE queue = 'cfg_mr';
SELECT wf_configure_queue('cfg_mr', max_running => 0, paused => false);
SELECT paused, max_running FROM wf.queue_stats WHERE queue = 'cfg_mr';
