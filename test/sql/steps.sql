-- Inside a running job: checkpoints (wf_checkpoint), durable sleep
-- (wf_snooze), events (wf_await_event, wf_signal), and cron schedules
-- (wf_schedule, wf_unschedule, wf.schedules) fired by a sweep. Bad input to
-- every one of them. Queues of this file: stp_*; events and schedules are
-- named stp-*.
-- The background worker (wf.sweep_interval = 200ms) runs beside this file:
-- what it may do first (time out a wait, fire a due schedule) is waited
-- for, never raced.

-- Waits until the job's status is `want` (or 10 s pass); returns the status.
CREATE FUNCTION stp_wait_status(q text, j bigint, want text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '10 seconds';
    current text;
BEGIN
    LOOP
        PERFORM wf_sweep();
        SELECT s.status INTO current FROM wf.jobs s WHERE s.queue = q AND s.id = j;
        EXIT WHEN current = want OR clock_timestamp() > deadline;
        PERFORM pg_sleep(0.02);
    END LOOP;
    RETURN current;
END
$$;

-- ===== 1. wf_checkpoint =====
SELECT wf_enqueue('stp_ck', '{"doc": 1}', max_attempts => 3) AS j \gset
-- A first claim has no checkpoints.
SELECT attempt, checkpoints, events FROM wf_claim('stp_ck');
SELECT wf_checkpoint('stp_ck', :j, 1, 'download', '{"bytes": 10}') AS first;
-- The same step again: the first output is kept.
SELECT wf_checkpoint('stp_ck', :j, 1, 'download', '{"bytes": 99}') AS again;
-- Without an output (NULL is recorded as JSON null in checkpoints).
SELECT wf_checkpoint('stp_ck', :j, 1, 'parse') AS no_output;
SELECT wf_checkpoint('stp_ck', :j, 1, 'Parse', '[1, 2]') AS case_sensitive;
-- Stale tokens record nothing: another attempt, another job, another queue.
SELECT wf_checkpoint('stp_ck', :j, 2, 'stale', '1') AS wrong_attempt,
       wf_checkpoint('stp_ck', :j, 0, 'stale', '1') AS attempt_zero,
       wf_checkpoint('stp_ck', :j + 1000000, 1, 'stale', '1') AS wrong_id,
       wf_checkpoint('stp_ck_other', :j, 1, 'stale', '1') AS wrong_queue;
SELECT step, output, attempt, recorded_at <= now() AS recorded FROM wf.checkpoint
 WHERE queue = 'stp_ck' ORDER BY step;
-- A retry: the next claim hands the checkpoints back, keyed by step.
SELECT wf_fail('stp_ck', :j, 1, 'network down', retry_in => '0 seconds') AS status;
SELECT wf_checkpoint('stp_ck', :j, 1, 'late', '1') AS after_fail;
SELECT attempt, checkpoints, events FROM wf_claim('stp_ck');
-- Attempt 2 adds one, and cannot overwrite the first run's.
SELECT wf_checkpoint('stp_ck', :j, 2, 'upload', '"s3://bucket/doc1"') AS upload,
       wf_checkpoint('stp_ck', :j, 2, 'download', '{"bytes": 5}') AS download,
       wf_checkpoint('stp_ck', :j, 1, 'stale', '1') AS old_attempt;
-- Recovered after its session is lost (here: by a lapsed lease), the job
-- gets them all on its next claim too.
SELECT wf_heartbeat('stp_ck', :j, 2, extend => '10 milliseconds') AS extended;
SELECT pg_sleep(0.05);
SELECT stp_wait_status('stp_ck', :j, 'pending') AS status;
SELECT attempt, checkpoints FROM wf_claim('stp_ck');
SELECT wf_complete('stp_ck', :j, 3, '{"ok": true}') AS completed;
-- A finished job takes no checkpoint.
SELECT wf_checkpoint('stp_ck', :j, 3, 'after_done', '1') AS after_done;
SELECT count(*) AS checkpoints FROM wf.checkpoint WHERE queue = 'stp_ck';
-- A pending job (never claimed) takes none either.
SELECT wf_enqueue('stp_ck', '{"doc": 2}', run_at => 'tomorrow') AS j2 \gset
SELECT wf_checkpoint('stp_ck', :j2, 0, 'x') AS pending_attempt0,
       wf_checkpoint('stp_ck', :j2, 1, 'x') AS pending_attempt1;
-- A checkpoint rolls back with its transaction.
SELECT wf_enqueue('stp_ck_tx', '{}') AS j3 \gset
SELECT count(*) FROM wf_claim('stp_ck_tx');
BEGIN;
SELECT wf_checkpoint('stp_ck_tx', :j3, 1, 'step', '1') AS in_tx;
ROLLBACK;
SELECT wf_checkpoint('stp_ck_tx', :j3, 1, 'step', '2') AS after_rollback;
SELECT output FROM wf.checkpoint WHERE queue = 'stp_ck_tx';

-- ===== 2. wf_snooze =====
-- A job with a single attempt sleeps, and still has its attempt after.
SELECT wf_enqueue('stp_sn', '{"n": "sleeper"}', max_attempts => 1) AS s \gset
SELECT attempt, max_attempts FROM wf_claim('stp_sn', worker => 'w1');
SELECT wf_checkpoint('stp_sn', :s, 1, 'before_sleep', '"half done"') AS checkpoint;
SELECT wf_snooze('stp_sn', :s, 1, '1 hour') AS status;
SELECT status, attempt, max_attempts, run_at > now() + interval '59 minutes' AS in_an_hour,
       run_at < now() + interval '61 minutes' AS not_later, lease_expires_at,
       finished_at, last_error
  FROM wf.jobs WHERE id = :s;
-- Not ready until then.
SELECT count(*) AS claimable FROM wf_claim('stp_sn');
-- The token of the run that snoozed is stale now.
SELECT wf_snooze('stp_sn', :s, 1, '1 second') AS again,
       wf_heartbeat('stp_sn', :s, 1) AS heartbeat,
       wf_complete('stp_sn', :s, 1) AS completed,
       wf_fail('stp_sn', :s, 1, 'e') AS failed,
       wf_checkpoint('stp_sn', :s, 1, 'x') AS checkpoint;
SELECT status, attempt, max_attempts FROM wf.jobs WHERE id = :s;
-- A zero delay: ready again at once; the next claim is attempt 2 of 2 (the
-- snooze spent no attempt) with the checkpoints of the first.
SELECT wf_enqueue('stp_sn0', '{"n": "nap"}', max_attempts => 1) AS s0 \gset
SELECT attempt, max_attempts FROM wf_claim('stp_sn0');
SELECT wf_checkpoint('stp_sn0', :s0, 1, 'before_nap', '1') AS checkpoint;
SELECT wf_snooze('stp_sn0', :s0, 1, '0 seconds') AS status;
SELECT status, run_at <= now() AS due FROM wf.jobs WHERE id = :s0;
SELECT attempt, max_attempts, checkpoints, events FROM wf_claim('stp_sn0');
-- A real failure now spends the one real attempt: failed.
SELECT wf_fail('stp_sn0', :s0, 2, 'real failure') AS status;
-- A short delay, waited out.
SELECT wf_enqueue('stp_sn_short', '{}') AS ss \gset
SELECT count(*) FROM wf_claim('stp_sn_short');
SELECT wf_snooze('stp_sn_short', :ss, 1, '500 milliseconds') AS status;
SELECT count(*) AS claimable_at_once FROM wf_claim('stp_sn_short');
SELECT pg_sleep(0.7);
SELECT attempt, max_attempts FROM wf_claim('stp_sn_short');
-- A snooze after a cancel was requested ends the job cancelled.
SELECT wf_enqueue('stp_sn_cancel', '{}') AS sc \gset
SELECT count(*) FROM wf_claim('stp_sn_cancel');
SELECT wf_cancel('stp_sn_cancel', :sc) AS cancel_requested;
SELECT wf_snooze('stp_sn_cancel', :sc, 1, '1 minute') AS status;
SELECT status, finished_at IS NOT NULL AS finished FROM wf.jobs WHERE id = :sc;
-- A snoozing step of a workflow keeps its dependents blocked.
SELECT wf_submit('{"queue": "stp_sn_wf", "steps": [{"name": "nap"}, {"name": "next", "after": ["nap"]}]}') AS w \gset
SELECT count(*) FROM wf_claim('stp_sn_wf');
SELECT wf_snooze('stp_sn_wf', id, 1, '1 hour') AS status FROM wf.jobs WHERE workflow_id = :'w' AND step_name = 'nap';
SELECT step_name, status FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT status, pending, blocked FROM wf.workflows WHERE workflow_id = :'w';
-- A snooze rolls back with its transaction.
SELECT wf_enqueue('stp_sn_tx', '{}') AS st \gset
SELECT count(*) FROM wf_claim('stp_sn_tx');
BEGIN;
SELECT wf_snooze('stp_sn_tx', :st, 1, '1 hour') AS status;
ROLLBACK;
SELECT status, attempt, max_attempts FROM wf.jobs WHERE id = :st;
SELECT wf_complete('stp_sn_tx', :st, 1) AS completed;

-- ===== 3. wf_await_event and wf_signal =====
SELECT wf_enqueue('stp_ev', '{"n": 1}') AS e1 \gset
SELECT wf_enqueue('stp_ev', '{"n": 2}') AS e2 \gset
SELECT count(*) FROM wf_claim('stp_ev', max_jobs => 2, lease => '1 hour');
SELECT wf_await_event('stp_ev', :e1, 1, 'stp-approved') AS status;
SELECT wf_await_event('stp_ev', :e2, 1, 'stp-approved', timeout => '1 hour') AS status;
-- Parked: waiting, holding no claim or lease, spending no attempt.
SELECT payload->>'n' AS job, status, waiting_for, attempt, lease_expires_at, events
  FROM wf.jobs WHERE queue = 'stp_ev' ORDER BY id;
SELECT count(*) AS claims FROM wf.claim WHERE queue = 'stp_ev';
SELECT count(*) AS claimable FROM wf_claim('stp_ev');
SELECT waiting FROM wf.queue_stats WHERE queue = 'stp_ev';
-- The waiting run's token is no longer valid for anything.
SELECT wf_heartbeat('stp_ev', :e1, 1) AS heartbeat,
       wf_complete('stp_ev', :e1, 1) AS completed,
       wf_await_event('stp_ev', :e1, 1, 'stp-approved') AS await_again,
       wf_snooze('stp_ev', :e1, 1, '1 second') AS snooze;
-- The reaper leaves waiting jobs alone.
SELECT wf_sweep() >= 0 AS swept;
SELECT count(*) AS still_waiting FROM wf.jobs WHERE queue = 'stp_ev' AND status = 'waiting';
-- Signalling an event nobody waits for.
SELECT wf_signal('stp-nobody') AS released;
-- The signal releases both waiters, with its payload.
SELECT wf_signal('stp-approved', '{"by": "ada"}') AS released;
SELECT payload->>'n' AS job, status, waiting_for, run_at <= now() AS due
  FROM wf.jobs WHERE queue = 'stp_ev' ORDER BY id;
SELECT payload->>'n' AS job, attempt, events, checkpoints
  FROM wf_claim('stp_ev', max_jobs => 2) ORDER BY 1;
-- A second signal of the same event finds no waiter.
SELECT wf_signal('stp-approved', '{"by": "bob"}') AS released;
SELECT name, signalled_at IS NOT NULL AS signalled FROM wf.event WHERE name LIKE 'stp-%' ORDER BY name;
-- The event was kept: awaiting it now goes on at once (pending), with the
-- event delivered on the next claim.
SELECT wf_await_event('stp_ev', :e1, 2, 'stp-approved') AS status;
SELECT status, waiting_for FROM wf.jobs WHERE id = :e1;
SELECT attempt, events FROM wf_claim('stp_ev');
-- A second event: the events of both waits are delivered.
SELECT wf_await_event('stp_ev', :e1, 3, 'stp-second') AS status;
SELECT wf_signal('stp-second', '[1, 2, 3]') AS released;
SELECT attempt, events FROM wf_claim('stp_ev');
SELECT wf_complete('stp_ev', :e1, 4, '{"done": 1}') AS completed;
SELECT wf_complete('stp_ev', :e2, 2, '{"done": 2}') AS completed;

-- Awaiting spends no attempt: a job with one attempt awaits, is claimed
-- again (attempt 2 of 2), and a failure then spends its one real attempt.
SELECT wf_enqueue('stp_ev_once', '{}', max_attempts => 1) AS eo \gset
SELECT attempt, max_attempts FROM wf_claim('stp_ev_once');
SELECT wf_await_event('stp_ev_once', :eo, 1, 'stp-once') AS status;
SELECT status, attempt, max_attempts FROM wf.jobs WHERE id = :eo;
SELECT wf_signal('stp-once') AS released;
SELECT attempt, max_attempts, events FROM wf_claim('stp_ev_once');
SELECT wf_fail('stp_ev_once', :eo, 2, 'broke') AS status;

-- Signal before await, payload NULL.
SELECT wf_signal('stp-early') AS released;
SELECT wf_enqueue('stp_ev_early', '{}') AS e3 \gset
SELECT count(*) FROM wf_claim('stp_ev_early');
SELECT wf_await_event('stp_ev_early', :e3, 1, 'stp-early', timeout => '1 second') AS status;
SELECT attempt, events FROM wf_claim('stp_ev_early');
-- A signal rolled back is no signal.
SELECT wf_enqueue('stp_ev_rb', '{}') AS e4 \gset
SELECT count(*) FROM wf_claim('stp_ev_rb');
SELECT wf_await_event('stp_ev_rb', :e4, 1, 'stp-rolled-back') AS status;
BEGIN;
SELECT wf_signal('stp-rolled-back', '"x"') AS released;
ROLLBACK;
SELECT status, waiting_for FROM wf.jobs WHERE id = :e4;
-- An await rolled back leaves the job running.
SELECT wf_enqueue('stp_ev_rb2', '{}') AS e5 \gset
SELECT count(*) FROM wf_claim('stp_ev_rb2');
BEGIN;
SELECT wf_await_event('stp_ev_rb2', :e5, 1, 'stp-other') AS status;
ROLLBACK;
SELECT status, waiting_for FROM wf.jobs WHERE id = :e5;
SELECT wf_complete('stp_ev_rb2', :e5, 1) AS completed;

-- A timeout: the job is ready again with the event marked timed out.
SELECT wf_enqueue('stp_ev_to', '{}') AS e6 \gset
SELECT count(*) FROM wf_claim('stp_ev_to');
SELECT wf_await_event('stp_ev_to', :e6, 1, 'stp-never', timeout => '50 milliseconds') AS status;
SELECT pg_sleep(0.1);
SELECT stp_wait_status('stp_ev_to', :e6, 'pending') AS status;
SELECT waiting_for FROM wf.jobs WHERE id = :e6;
SELECT attempt, events FROM wf_claim('stp_ev_to');
-- A signal after the timeout releases nothing more (the job runs its
-- second attempt).
SELECT wf_signal('stp-never', '1') AS released;
SELECT status FROM wf.jobs WHERE id = :e6;
-- A zero timeout is a timeout at once (at the next sweep).
SELECT wf_enqueue('stp_ev_to0', '{}') AS e7 \gset
SELECT count(*) FROM wf_claim('stp_ev_to0');
SELECT wf_await_event('stp_ev_to0', :e7, 1, 'stp-never-0', timeout => '0 seconds') AS status;
SELECT stp_wait_status('stp_ev_to0', :e7, 'pending') AS status;
SELECT events FROM wf_claim('stp_ev_to0');

-- Cancelling a waiting job: cancelled at once; a later signal does not
-- wake it.
SELECT wf_enqueue('stp_ev_cancel', '{}') AS e8 \gset
SELECT count(*) FROM wf_claim('stp_ev_cancel');
SELECT wf_await_event('stp_ev_cancel', :e8, 1, 'stp-cancelled') AS status;
SELECT wf_cancel('stp_ev_cancel', :e8) AS cancelled;
SELECT status, waiting_for, finished_at IS NOT NULL AS finished FROM wf.jobs WHERE id = :e8;
SELECT wf_signal('stp-cancelled') AS released;
SELECT status FROM wf.jobs WHERE id = :e8;
SELECT count(*) AS claimable FROM wf_claim('stp_ev_cancel');
-- wf_retry of it: pending again, nothing left waiting.
SELECT wf_retry('stp_ev_cancel', :e8) AS retried;
SELECT status, waiting_for FROM wf.jobs WHERE id = :e8;
-- Awaiting with a cancel requested: cancelled.
SELECT wf_enqueue('stp_ev_cancel2', '{}') AS e9 \gset
SELECT count(*) FROM wf_claim('stp_ev_cancel2');
SELECT wf_cancel('stp_ev_cancel2', :e9) AS cancel_requested;
SELECT wf_await_event('stp_ev_cancel2', :e9, 1, 'stp-x') AS status;
SELECT status FROM wf.jobs WHERE id = :e9;
-- A waiting step of a workflow: the workflow counts it as waiting, and
-- wf_cancel_workflow cancels it and its dependents.
SELECT wf_submit('{"queue": "stp_ev_wf", "steps": [{"name": "approve"}, {"name": "ship", "after": ["approve"]}]}') AS w \gset
SELECT count(*) FROM wf_claim('stp_ev_wf');
SELECT wf_await_event('stp_ev_wf', id, 1, 'stp-wf-approved') AS status
  FROM wf.jobs WHERE workflow_id = :'w' AND step_name = 'approve';
SELECT status, waiting, blocked FROM wf.workflows WHERE workflow_id = :'w';
SELECT wf_cancel_workflow(:'w') AS cancelled;
SELECT step_name, status, waiting_for FROM wf.jobs WHERE workflow_id = :'w' ORDER BY id;
SELECT wf_signal('stp-wf-approved') AS released;
SELECT status, cancelled FROM wf.workflows WHERE workflow_id = :'w';
-- A signalled waiting step in a workflow goes on; its dependents after it.
SELECT wf_submit('{"queue": "stp_ev_wf2", "steps": [{"name": "approve"}, {"name": "ship", "after": ["approve"]}]}') AS w \gset
SELECT count(*) FROM wf_claim('stp_ev_wf2');
SELECT wf_await_event('stp_ev_wf2', id, 1, 'stp-wf2-approved') AS status
  FROM wf.jobs WHERE workflow_id = :'w' AND step_name = 'approve';
SELECT wf_signal('stp-wf2-approved', '{"ok": true}') AS released;
SELECT step_name, attempt, events FROM wf_claim('stp_ev_wf2');
SELECT wf_complete('stp_ev_wf2', id, 2, '"approved"') AS completed
  FROM wf.jobs WHERE workflow_id = :'w' AND step_name = 'approve';
SELECT step_name, inputs, events FROM wf_claim('stp_ev_wf2');

-- ===== 4. Schedules =====
-- Expected next fire times, computed here in UTC from a time t.
CREATE FUNCTION stp_utc(t timestamptz) RETURNS timestamp LANGUAGE sql AS
    $$SELECT t AT TIME ZONE 'UTC'$$;
SELECT wf_schedule('stp-hourly', '0 * * * *', 'stp_sched', '{"report": "hourly"}') AS next \gset
SELECT :'next'::timestamptz IN (
         (date_trunc('hour', stp_utc(now())) + interval '1 hour') AT TIME ZONE 'UTC',
         (date_trunc('hour', stp_utc(clock_timestamp())) + interval '1 hour') AT TIME ZONE 'UTC')
       AS next_hour;
SELECT name, cron, queue, payload, next_run = :'next'::timestamptz AS next_run_returned,
       last_run, last_job_id, created_at IS NOT NULL AS created, updated_at >= created_at AS updated
  FROM wf.schedules WHERE name = 'stp-hourly';
SELECT wf_schedule('stp-quarter', '*/15 * * * *', 'stp_sched') AS next \gset
SELECT :'next'::timestamptz IN (
         (date_trunc('hour', stp_utc(now()))
          + (floor(extract(minute FROM stp_utc(now())) / 15) + 1) * interval '15 minutes') AT TIME ZONE 'UTC',
         (date_trunc('hour', stp_utc(clock_timestamp()))
          + (floor(extract(minute FROM stp_utc(clock_timestamp())) / 15) + 1) * interval '15 minutes') AT TIME ZONE 'UTC')
       AS next_quarter;
SELECT payload FROM wf.schedules WHERE name = 'stp-quarter';
SELECT wf_schedule('stp-daily', '@daily', 'stp_sched', '[1]') AS next \gset
SELECT :'next'::timestamptz = (date_trunc('day', stp_utc(now())) + interval '1 day') AT TIME ZONE 'UTC'
       AS next_midnight_utc;
SELECT wf_schedule('stp-yearly', '0 0 1 1 *', 'stp_sched') =
       make_timestamptz(extract(year FROM stp_utc(now()))::int + 1, 1, 1, 0, 0, 0, 'UTC') AS next_new_year;
SELECT wf_schedule('stp-names', '30 9 * JAN-DEC MON', 'stp_sched') AS next \gset
SELECT extract(isodow FROM stp_utc(:'next')) AS dow, to_char(stp_utc(:'next'), 'HH24:MI:SS') AS time_utc,
       :'next'::timestamptz > now() AND :'next'::timestamptz <= now() + interval '7 days' AS within_a_week;
-- Replacing a schedule keeps one row, with the new expression.
SELECT wf_schedule('stp-hourly', '15 * * * *', 'stp_sched2', '{"report": "v2"}') AS next \gset
SELECT extract(minute FROM :'next'::timestamptz) AS minute,
       :'next'::timestamptz > now() AND :'next'::timestamptz <= now() + interval '1 hour' AS within_an_hour;
SELECT name, cron, queue, payload, updated_at >= created_at AS updated
  FROM wf.schedules WHERE name = 'stp-hourly';
SELECT count(*) AS schedules FROM wf.schedules WHERE name LIKE 'stp-%';
-- Nothing was enqueued by creating them.
SELECT count(*) AS jobs FROM wf.jobs WHERE queue LIKE 'stp\_sched%';
-- wf_unschedule: true once, then false.
SELECT wf_unschedule('stp-quarter') AS removed, wf_unschedule('stp-quarter') AS again,
       wf_unschedule('stp-never-existed') AS unknown;
SELECT name FROM wf.schedules WHERE name LIKE 'stp-%' ORDER BY name;
-- A schedule that can never fire (February 30th).
SELECT try_sql($$SELECT wf_schedule('stp-feb30', '0 0 30 2 *', 'stp_sched')$$);
SELECT next_run FROM wf.schedules WHERE name = 'stp-feb30';
SELECT wf_unschedule('stp-feb30') IS NOT NULL AS unscheduled;

-- Firing. A due schedule fires at the next sweep (by wf_sweep() or the
-- background worker, whichever comes first): one job, keyed by the tick.
-- Waits until the schedule's last_run is set to `tick` (or 10 s pass).
CREATE FUNCTION stp_wait_fired(s text, tick timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '10 seconds';
BEGIN
    LOOP
        PERFORM wf_sweep();
        IF EXISTS (SELECT 1 FROM wf.schedules WHERE name = s AND last_run >= tick) THEN
            RETURN true;
        END IF;
        IF clock_timestamp() > deadline THEN RETURN false; END IF;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
$$;
SELECT wf_schedule('stp-fire', '0 0 1 1 *', 'stp_fire', '{"k": "v"}') IS NOT NULL AS scheduled;
-- As if the server had been down for three years: three ticks missed.
UPDATE wf.schedule SET next_run_at = make_timestamptz(extract(year FROM stp_utc(now()))::int - 2, 1, 1, 0, 0, 0, 'UTC')
 WHERE name = 'stp-fire' RETURNING extract(epoch FROM next_run_at)::bigint AS tick \gset
SELECT stp_wait_fired('stp-fire', to_timestamp(:tick)) AS fired;
-- It fired once, not once per missed tick, for its latest missed tick
-- (January 1st of this year, as the README says).
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'stp_fire';
SELECT j.status, j.payload, j.idempotency_key = 'schedule:stp-fire:' || extract(epoch FROM s.last_run)::bigint AS keyed_by_tick,
       j.idempotency_key LIKE 'schedule:stp-fire:%' AS key_prefix, j.id = s.last_job_id AS last_job,
       s.last_run = make_timestamptz(extract(year FROM stp_utc(now()))::int, 1, 1, 0, 0, 0, 'UTC') AS latest_missed_tick,
       s.next_run = make_timestamptz(extract(year FROM stp_utc(now()))::int + 1, 1, 1, 0, 0, 0, 'UTC') AS next_is_next_year,
       s.last_run <= now() AS last_run_past, j.created_at >= s.last_run AS not_early
  FROM wf.jobs j, wf.schedules s WHERE j.queue = 'stp_fire' AND s.name = 'stp-fire';
-- More sweeps fire nothing more.
SELECT wf_sweep() >= 0 AS swept;
SELECT pg_sleep(0.5);
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'stp_fire';
-- Replaced by a monthly schedule, due since the first of this month: a
-- second job, with its own key.
SELECT wf_schedule('stp-fire', '0 0 1 * *', 'stp_fire', '{"k": "monthly"}') IS NOT NULL AS replaced;
UPDATE wf.schedule SET next_run_at = date_trunc('month', stp_utc(now())) AT TIME ZONE 'UTC'
 WHERE name = 'stp-fire' RETURNING extract(epoch FROM next_run_at)::bigint AS tick2 \gset
SELECT stp_wait_fired('stp-fire', to_timestamp(:tick2)) AS fired;
SELECT count(*) AS jobs, count(DISTINCT idempotency_key) AS keys FROM wf.jobs WHERE queue = 'stp_fire';
SELECT idempotency_key = 'schedule:stp-fire:' || :tick2 AS keyed_by_tick FROM wf.jobs
 WHERE queue = 'stp_fire' AND payload = '{"k": "monthly"}';
-- The jobs are ordinary jobs: claim them.
SELECT payload, attempt FROM wf_claim('stp_fire', max_jobs => 5) ORDER BY 1;
-- The same tick due once more (a clock set back): the key is taken, no
-- second job for it.
UPDATE wf.schedule SET next_run_at = to_timestamp(:tick2) WHERE name = 'stp-fire';
SELECT pg_sleep(0.3);
SELECT wf_sweep() >= 0 AS swept;
SELECT count(*) AS jobs, count(DISTINCT idempotency_key) AS keys FROM wf.jobs WHERE queue = 'stp_fire';
SELECT next_run > now() AS rescheduled FROM wf.schedules WHERE name = 'stp-fire';
-- Unscheduled: its jobs stay, nothing fires.
SELECT wf_unschedule('stp-fire') AS removed;
SELECT count(*) AS jobs FROM wf.jobs WHERE queue = 'stp_fire';

-- ===== 5. Bad input: an error with its SQLSTATE, and nothing changed =====
CREATE FUNCTION stp_state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' / ',
        (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY queue, id), '')) FROM wf.job j),
        (SELECT md5(coalesce(string_agg(c::text, ',' ORDER BY queue, job_id, step), '')) FROM wf.checkpoint c),
        (SELECT md5(coalesce(string_agg(e::text, ',' ORDER BY name), '')) FROM wf.event e),
        (SELECT md5(coalesce(string_agg(w::text, ',' ORDER BY queue, id), '')) FROM wf.event_wait w),
        (SELECT md5(coalesce(string_agg(s::text, ',' ORDER BY name), '')) FROM wf.schedule s))
$$;
CREATE FUNCTION stp_bad(calls text[])
RETURNS TABLE (call text, error text, unchanged boolean) LANGUAGE plpgsql AS $$
DECLARE
    before text;
BEGIN
    FOREACH call IN ARRAY calls LOOP
        before := stp_state();
        error := try_sql('SELECT ' || call);
        unchanged := stp_state() = before;
        RETURN NEXT;
    END LOOP;
END
$$;
-- A running job the calls address, and a schedule they could replace.
SELECT wf_enqueue('stp_bad', '{}') AS b \gset
SELECT count(*) FROM wf_claim('stp_bad', lease => '1 hour');
SELECT wf_schedule('stp-bad', '0 0 1 1 *', 'stp_bad_sched') IS NOT NULL AS scheduled;
SELECT set_config('stp.b', :'b', false) IS NOT NULL AS set;
CREATE FUNCTION stp_b() RETURNS bigint LANGUAGE sql AS $$SELECT current_setting('stp.b')::bigint$$;

-- NULL where a value is required: 22004.
SELECT * FROM stp_bad(ARRAY[
  $$wf_checkpoint(NULL, stp_b(), 1, 's')$$,
  $$wf_checkpoint('stp_bad', NULL, 1, 's')$$,
  $$wf_checkpoint('stp_bad', stp_b(), NULL, 's')$$,
  $$wf_checkpoint('stp_bad', stp_b(), 1, NULL)$$,
  $$wf_snooze(NULL, stp_b(), 1, '1 s')$$,
  $$wf_snooze('stp_bad', NULL, 1, '1 s')$$,
  $$wf_snooze('stp_bad', stp_b(), NULL, '1 s')$$,
  $$wf_snooze('stp_bad', stp_b(), 1, NULL)$$,
  $$wf_await_event(NULL, stp_b(), 1, 'stp-e')$$,
  $$wf_await_event('stp_bad', NULL, 1, 'stp-e')$$,
  $$wf_await_event('stp_bad', stp_b(), NULL, 'stp-e')$$,
  $$wf_await_event('stp_bad', stp_b(), 1, NULL)$$,
  $$wf_signal(NULL)$$,
  $$wf_signal(NULL, '{}')$$,
  $$wf_schedule(NULL, '* * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', NULL, 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * * *', NULL)$$,
  $$wf_schedule('stp-bad', '* * * * *', 'stp_bad_sched', NULL)$$,
  $$wf_unschedule(NULL)$$
]);
-- Names: empty, too long (257 bytes), or not a queue name.
SELECT * FROM stp_bad(ARRAY[
  $$wf_checkpoint('stp_bad', stp_b(), 1, '')$$,
  $$wf_checkpoint('stp_bad', stp_b(), 1, repeat('s', 257))$$,
  $$wf_checkpoint('', stp_b(), 1, 's')$$,
  $$wf_checkpoint(repeat('q', 129), stp_b(), 1, 's')$$,
  $$wf_snooze('', stp_b(), 1, '1 s')$$,
  $$wf_await_event('', stp_b(), 1, 'stp-e')$$,
  $$wf_await_event('stp_bad', stp_b(), 1, '')$$,
  $$wf_await_event('stp_bad', stp_b(), 1, repeat('e', 257))$$,
  $$wf_signal('')$$,
  $$wf_signal(repeat('e', 257))$$,
  $$wf_schedule('', '* * * * *', 'stp_bad_sched')$$,
  $$wf_schedule(repeat('n', 257), '* * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * * *', '')$$,
  $$wf_schedule('stp-bad', '* * * * *', repeat('q', 129))$$,
  $$wf_schedule('stp-bad', '* * * * *', E'bad\nqueue')$$,
  $$wf_unschedule('')$$
]);
-- Intervals: negative delays and timeouts (22023); sizes over
-- wf.max_payload_size (54000).
SET wf.max_payload_size = '1kB';
SELECT * FROM stp_bad(ARRAY[
  $$wf_snooze('stp_bad', stp_b(), 1, '-1 second')$$,
  $$wf_snooze('stp_bad', stp_b(), 1, '-1 day')$$,
  $$wf_await_event('stp_bad', stp_b(), 1, 'stp-e', timeout => '-1 second')$$,
  $$wf_checkpoint('stp_bad', stp_b(), 1, 'big', jsonb_build_object('x', repeat('x', 2000)))$$,
  $$wf_signal('stp-big', jsonb_build_object('x', repeat('x', 2000)))$$,
  $$wf_schedule('stp-bad', '* * * * *', 'stp_bad_sched', jsonb_build_object('x', repeat('x', 2000)))$$
]);
RESET wf.max_payload_size;
-- Bad cron expressions (22023), each message naming the field.
SELECT * FROM stp_bad(ARRAY[
  $$wf_schedule('stp-bad', '', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '   ', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '60 * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* 24 * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * 0 * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * 32 * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * 13 *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * * 8', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', 'a * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '*/0 * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '5-1 * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '1,,2 * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '-1 * * * *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '* * * FOO *', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '@every_minute', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', '@reboot', 'stp_bad_sched')$$,
  $$wf_schedule('stp-bad', repeat('* ', 2000), 'stp_bad_sched')$$
]);
SELECT try_sql($$SELECT wf_schedule('stp-bad', '0 25 * * *', 'stp_bad_sched')$$, true);
-- The schedule the calls tried to replace is as it was.
SELECT cron, queue, payload FROM wf.schedules WHERE name = 'stp-bad';
SELECT wf_unschedule('stp-bad') AS removed;
-- The running job is still running, at attempt 1.
SELECT status, attempt, max_attempts FROM wf.jobs WHERE id = :b;
SELECT wf_complete('stp_bad', :b, 1) AS completed;
