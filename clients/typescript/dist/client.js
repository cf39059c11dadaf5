// The producer's side: each function is one pg_wf SQL call on the connection you pass, so it
// joins your transaction when you pass the client that ran BEGIN (roll back, and nothing happened).
import { call, interval, json, timestamp, toId } from './sql.js';
async function one(db, q) {
    const res = await db.query(`SELECT ${q.text} AS v`, q.values);
    return res.rows[0].v;
}
/** Adds a job to `queue`; returns its id (an existing job's, for a repeated idempotency or dedup key). */
export async function enqueue(db, queue, payload = {}, options = {}) {
    const q = call('wf_enqueue', [[queue, 'text'], [json(payload), 'jsonb']], {
        run_at: [timestamp(options.runAt), 'timestamptz'],
        priority: [options.priority, 'int'],
        max_attempts: [options.maxAttempts, 'int'],
        idempotency_key: [options.idempotencyKey, 'text'],
        workflow_id: [options.workflowId, 'uuid'],
        step_name: [options.stepName, 'text'],
        depends_on: [options.dependsOn, 'bigint[]'],
        key: [options.key, 'text'],
        dedup_key: [options.dedupKey, 'text'],
        on_duplicate: [options.onDuplicate, 'text'],
        max_run_time: [interval(options.maxRunTime), 'interval'],
        start_by: [timestamp(options.startBy), 'timestamptz'],
        version: [options.version, 'text'],
    });
    return toId(await one(db, q));
}
/** One job per payload, in one statement; the ids in the payloads' order. */
export async function enqueueBatch(db, queue, payloads, options = {}) {
    const q = call('wf_enqueue_batch', [[queue, 'text'], [json(payloads), 'jsonb']], {
        keys: [options.keys, 'text[]'],
    });
    const res = await db.query(`SELECT id FROM ${q.text} AS id`, q.values);
    return res.rows.map((r) => toId(r.id));
}
/**
 * Submits a workflow (all its steps in one statement); returns its id. With a `key` in the spec,
 * the active workflow holding that key is returned instead of starting a second one.
 */
export async function submit(db, spec) {
    return one(db, call('wf_submit', [[json(spec), 'jsonb']]));
}
/**
 * Signals an event: every job waiting for it becomes ready with the payload in its events, and
 * the signal is kept for jobs that await it later. Returns the number of jobs made ready.
 */
export async function signal(db, event, payload) {
    return one(db, call('wf_signal', [[event, 'text'], [json(payload) ?? null, 'jsonb']]));
}
/**
 * Signal-with-start: the active workflow holding `spec.key` (started from `spec` if there is
 * none) and the event signalled, in one transaction. Returns the workflow's id.
 */
export async function signalWithStart(db, spec, event, payload) {
    return one(db, call('wf_signal_with_start', [[json(spec), 'jsonb'], [event, 'text'], [json(payload) ?? null, 'jsonb']]));
}
const FINISHED = ['done', 'failed', 'cancelled'];
function outcome(row) {
    return {
        status: row.status,
        result: (row.result ?? null),
        error: row.error ?? null,
        finished: FINISHED.includes(row.status),
        ok: row.status === 'done',
    };
}
/**
 * Blocks until the job has finished (woken by the commit that ends it, no polling), up to
 * `timeout` (default 30 s); returns its status, result and error, or on a timeout the status it has
 * then. Call it after the enqueue committed, on a connection that is not in that transaction.
 */
export async function waitJob(db, queue, id, options = {}) {
    const q = call('wf_wait_job', [[queue, 'text'], [id, 'bigint']], { timeout: [interval(options.timeout), 'interval'] });
    const res = await db.query(`SELECT status, result, error FROM ${q.text}`, q.values);
    return outcome(res.rows[0]);
}
/** `waitJob` for a workflow: `result` holds its final steps' results by step name. */
export async function waitWorkflow(db, workflowId, options = {}) {
    const q = call('wf_wait_workflow', [[workflowId, 'uuid']], { timeout: [interval(options.timeout), 'interval'] });
    const res = await db.query(`SELECT status, result, error FROM ${q.text}`, q.values);
    return outcome(res.rows[0]);
}
/** `wf_workflow`: the workflow's status, counts and every step (name, status, attempts, result, ...). */
export async function workflow(db, workflowId) {
    return one(db, call('wf_workflow', [[workflowId, 'uuid']]));
}
/** Cancels a job (a running one is flagged: its heartbeat turns false). */
export async function cancel(db, queue, id) {
    return one(db, call('wf_cancel', [[queue, 'text'], [id, 'bigint']]));
}
/** Runs a failed or cancelled job again with a fresh budget of attempts. */
export async function retry(db, queue, id) {
    return one(db, call('wf_retry', [[queue, 'text'], [id, 'bigint']]));
}
/** `wf_retry_where`: retries the failed or cancelled jobs of `queue` that match; returns how many. */
export async function retryWhere(db, queue, where = {}) {
    return one(db, call('wf_retry_where', [[queue, 'text']], {
        ids: [where.ids, 'bigint[]'],
        error_contains: [where.errorContains, 'text'],
        max_jobs: [where.maxJobs, 'int'],
    }));
}
/**
 * `wf_cancel_where`: cancels the matching jobs of `queue` (blocked, pending, waiting, failed; running
 * ones are flagged), narrowed to `statuses` if given; returns how many.
 */
export async function cancelWhere(db, queue, where = {}) {
    return one(db, call('wf_cancel_where', [[queue, 'text']], {
        ids: [where.ids, 'bigint[]'],
        error_contains: [where.errorContains, 'text'],
        statuses: [where.statuses, 'text[]'],
        max_jobs: [where.maxJobs, 'int'],
    }));
}
/** Cancels every unfinished step of a workflow; returns how many. */
export async function cancelWorkflow(db, workflowId) {
    return one(db, call('wf_cancel_workflow', [[workflowId, 'uuid']]));
}
/** `wf_configure_queue`: settings left out keep their current value. */
export async function configureQueue(db, queue, settings) {
    const q = call('wf_configure_queue', [[queue, 'text']], {
        max_attempts: [settings.maxAttempts, 'int'],
        backoff_base: [interval(settings.backoffBase), 'interval'],
        backoff_max: [interval(settings.backoffMax), 'interval'],
        lease: [interval(settings.lease), 'interval'],
        max_running: [settings.maxRunning, 'int'],
        paused: [settings.paused, 'boolean'],
        rate_limit: [settings.rateLimit, 'int'],
        rate_period: [interval(settings.ratePeriod), 'interval'],
        key_rate_limit: [settings.keyRateLimit, 'int'],
        key_concurrency: [settings.keyConcurrency, 'int'],
        fair: [settings.fair, 'boolean'],
        ordered: [settings.ordered, 'boolean'],
        max_run_time: [interval(settings.maxRunTime), 'interval'],
        version: [settings.version, 'text'],
    });
    await db.query(`SELECT ${q.text}`, q.values);
}
/** Creates or replaces a cron schedule (UTC); returns its next run. */
export async function schedule(db, name, cron, queue, payload = {}) {
    return one(db, call('wf_schedule', [[name, 'text'], [cron, 'text'], [queue, 'text'], [json(payload), 'jsonb']]));
}
/** `wf_enable_schedule`: stops or restarts a schedule; false if there is none. */
export async function enableSchedule(db, name, enabled) {
    return one(db, call('wf_enable_schedule', [[name, 'text'], [enabled, 'boolean']]));
}
/** Removes a schedule; false if there was none. */
export async function unschedule(db, name) {
    return one(db, call('wf_unschedule', [[name, 'text']]));
}
