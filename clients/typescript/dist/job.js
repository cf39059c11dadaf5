import { ChildrenTimeout, EventTimeout, JobLost, Suspended } from './errors.js';
import { call, interval, json } from './sql.js';
export const CHILD_EVENT = 'wf:child:';
export const SLEEP_CHECKPOINT = 'pg_wf.sleep:';
/** A stale completion inside `transaction()`: rolls its block back. */
class Rollback extends Error {
}
/**
 * One claimed job, given to its handler. Every call it makes for the job is fenced by the
 * attempt's token: once the job is no longer this attempt's (recovered, cancelled, timed out,
 * given back), a call that needs the token throws `JobLost` and the handler stops; the worker
 * logs it and writes nothing more.
 */
export class Job {
    queue;
    id;
    /** this attempt's number (1 on the first run; a retried or recovered job counts on) */
    attempt;
    payload;
    /** results of the jobs this one runs after, by step name (`{}` if none) */
    inputs;
    workflowId;
    /** its workflow step's name */
    step;
    priority;
    maxAttempts;
    leaseExpiresAt;
    /** outputs recorded by `checkpoint` in this and earlier runs, by name */
    checkpoints;
    /** events delivered to the job: signals, timeouts, children's outcomes (`wf:child:<name>`) */
    events;
    /**
     * The session that owns the job (a pg.Client in autocommit), for the handler's own statements;
     * `transaction()` runs a transaction on it.
     */
    client;
    /** the name of the worker slot that claimed it (wf.jobs.worker) */
    workerName;
    /** aborted once the job is no longer this attempt's (`lost`): a long handler should stop */
    signal;
    /** @internal */ finished = undefined;
    /** @internal */ lostReason = '';
    enqueueKey;
    host;
    abort = new AbortController();
    steps = [];
    children = [];
    sleeps = 0;
    inTransaction = false;
    /** @internal */
    constructor(row, client, workerName, host) {
        this.queue = row.queue;
        this.id = Number(row.id);
        this.attempt = row.attempt;
        this.payload = row.payload;
        this.inputs = row.inputs ?? {};
        this.workflowId = row.workflow_id;
        this.step = row.step_name;
        this.priority = row.priority;
        this.maxAttempts = row.max_attempts;
        this.leaseExpiresAt = row.lease_expires_at;
        this.checkpoints = { ...(row.checkpoints ?? {}) };
        this.events = { ...(row.events ?? {}) };
        this.enqueueKey = row.idempotency_key;
        this.client = client;
        this.workerName = workerName;
        this.host = host;
        this.signal = this.abort.signal;
    }
    toString() {
        return `job ${this.queue}/${this.id} (${this.step ? `${this.step}, ` : ''}attempt ${this.attempt})`;
    }
    /** The fencing token (queue, id, attempt) of this claim. */
    get token() {
        return [this.queue, this.id, this.attempt];
    }
    /**
     * A key for outside APIs (an `Idempotency-Key` header): the enqueue's idempotency key, else
     * `<prefix>:<queue>:<id>` (prefix `pg_wf` unless the worker's `keyPrefix` says otherwise). The
     * same for every attempt and recovery of this job, never per attempt: a retry after a crash that
     * came after the outside call must present the same key, or the outside API does it twice.
     */
    get idempotencyKey() {
        return this.enqueueKey ?? `${this.host.keyPrefix}:${this.queue}:${this.id}`;
    }
    /**
     * True once a heartbeat (or another call) found the job no longer this attempt's: cancelled,
     * recovered, past its max_run_time, or given back at shutdown. Stop working on it.
     */
    get lost() {
        return this.signal.aborted;
    }
    // ------------------------------------------------------------------ in the handler
    /**
     * Runs `fn` once across attempts: its value (JSON; undefined is stored as null) is recorded
     * with `wf_checkpoint`, and a later run (after a crash, a retry, a park) gets it back from its
     * claim without running `fn` again. Inside `transaction()` the record commits with the block.
     */
    async checkpoint(name, fn) {
        if (Object.prototype.hasOwnProperty.call(this.checkpoints, name)) {
            this.host.logger.debug(`pg_wf: ${this}: checkpoint "${name}" restored`);
            return this.checkpoints[name];
        }
        this.check();
        const value = ((await fn()) ?? null);
        const status = await this.call(this.client, 'wf_checkpoint', [name, 'text'], [json(value), 'jsonb']);
        if (status === null) {
            this.finished = 'stale';
            this.throwLost('wf_checkpoint found the token stale');
        }
        this.checkpoints[name] = value;
        return value;
    }
    /**
     * A durable sleep: parks the job (`wf_snooze`: pending, no worker, no attempt spent) and ends
     * this run (throws `Suspended`); the handler runs again after `delay` (ms, or an interval as
     * text), and this call then returns at once. The sleep is a checkpoint (`pg_wf.sleep:<name>`);
     * unnamed sleeps are numbered in call order, so a handler must make them in the same order on
     * every run.
     */
    async sleep(delay, name) {
        this.sleeps++;
        const checkpoint = SLEEP_CHECKPOINT + (name ?? String(this.sleeps));
        this.notInTransaction('sleep');
        let status;
        if (Object.prototype.hasOwnProperty.call(this.checkpoints, checkpoint)) {
            const until = this.checkpoints[checkpoint]?.until;
            if (!until)
                return;
            status = await this.parking(async () => {
                const res = await this.client.query(`SELECT CASE WHEN $4::timestamptz > clock_timestamp()
                       THEN wf_snooze($1::text, $2::bigint, $3::int, $4::timestamptz - clock_timestamp())
                       ELSE 'elapsed' END AS status`, [...this.token, until]);
                return res.rows[0].status;
            });
            if (status === 'elapsed') {
                this.finished = undefined;
                return;
            }
        }
        else {
            status = await this.parking(async () => {
                // the wake time (the server's clock) and the snooze commit together
                await this.client.query('BEGIN');
                try {
                    const res = await this.client.query(`SELECT CASE WHEN wf_checkpoint($1::text, $2::bigint, $3::int, $4::text,
                                            jsonb_build_object('until', clock_timestamp() + $5::interval)) IS NULL
                         THEN NULL
                         ELSE wf_snooze($1::text, $2::bigint, $3::int, $5::interval) END AS status`, [...this.token, checkpoint, interval(delay)]);
                    await this.client.query('COMMIT');
                    return res.rows[0].status;
                }
                catch (err) {
                    await this.client.query('ROLLBACK').catch(() => undefined);
                    throw err;
                }
            });
        }
        this.park(status, typeof delay === 'number' ? `sleep ${delay} ms` : `sleep ${delay}`);
    }
    /**
     * The payload of `event` once it was signalled (`wf_signal`). Until then, parks the job
     * (`wf_await_event`: waiting, no worker, no attempt spent) and ends this run (throws
     * `Suspended`); the handler runs again when the signal arrives (at once if it was signalled
     * before: signals are kept), and this call then returns the payload. After the timeout it
     * throws `EventTimeout`. Event names are per job: awaiting one twice returns the first delivery.
     */
    async awaitEvent(event, options = {}) {
        const delivered = this.events[event];
        if (delivered) {
            if (delivered.status === 'signalled')
                return (delivered.payload ?? null);
            throw new EventTimeout(event);
        }
        this.notInTransaction('awaitEvent');
        const status = await this.parking(() => this.call(this.client, 'wf_await_event', [event, 'text'], {
            timeout: [interval(options.timeout), 'interval'],
        }));
        this.park(status, `awaitEvent "${event}"`);
    }
    /**
     * Starts the child workflow `name` (`wf_start_child`; `spec` is what `submit` takes, a single
     * job is a one-step spec) and returns its id. The same name again, in this run or a later one,
     * returns the same child: start them on every run, before `awaitChildren`.
     */
    async startChild(name, spec) {
        this.check();
        const child = await this.call(this.client, 'wf_start_child', [name, 'text'], [json(spec), 'jsonb']);
        if (child === null)
            this.throwLost('wf_start_child: the token is stale or a cancel was requested');
        if (!this.children.includes(name))
            this.children.push(name);
        return child;
    }
    /**
     * The outcomes of the children started with `startChild`, by name, once all have finished.
     * Until then parks the job (`wf_await_children`) and ends this run (throws `Suspended`); the
     * handler runs again with the outcomes in its events. A child that failed is an outcome with
     * status `failed`, not an error. After the timeout: `ChildrenTimeout` (with the outcomes that
     * arrived).
     */
    async awaitChildren(options = {}) {
        const outcomes = this.childOutcomes();
        if (this.children.every((name) => name in outcomes))
            return outcomes;
        if (this.events['wf:children']?.status === 'timed_out')
            throw new ChildrenTimeout(outcomes);
        this.notInTransaction('awaitChildren');
        const status = await this.parking(() => this.call(this.client, 'wf_await_children', {
            timeout: [interval(options.timeout), 'interval'],
        }));
        this.park(status, `awaitChildren (${this.children.length})`);
    }
    /** The child outcomes delivered so far (from the claim's events), by child name. */
    childOutcomes() {
        const out = {};
        for (const [key, o] of Object.entries(this.events)) {
            if (!key.startsWith(CHILD_EVENT) || !o)
                continue;
            out[key.slice(CHILD_EVENT.length)] = {
                status: o.status,
                results: o.results ?? {},
                error: o.error ?? null,
                workflowId: o.workflow_id ?? null,
                ok: o.status === 'done',
            };
        }
        return out;
    }
    /**
     * Fan-out at run time: steps (`submit`'s step objects) added to this job's workflow when it
     * completes, in the same statement (`wf_complete_with_steps`). Their `after` may name this step,
     * other new steps and done steps; `queue` defaults to this step's.
     */
    addSteps(steps) {
        this.steps.push(...steps);
    }
    /**
     * Tells pg_wf the job is alive and extends its lease (`wf_heartbeat`). The worker does this by
     * itself, well inside the lease; call it only to learn at once whether the job is still yours.
     * Throws `JobLost` if it is not.
     */
    async heartbeat() {
        this.check();
        if (this.finished !== undefined)
            return;
        const ok = await this.host.control((db) => this.call(db, 'wf_heartbeat'));
        if (!ok && this.finished === undefined) {
            this.markLost('a heartbeat found it cancelled, recovered or past its max_run_time');
            throw new JobLost(this.lostReason);
        }
    }
    /**
     * Reports progress (`wf_progress`: a small JSON value, up to 8 kB, shown in `wf.jobs.progress`
     * and `wf_workflow`; no WAL). Throws `JobLost` if the job is no longer yours.
     */
    async progress(report) {
        this.check();
        const ok = await this.host.control((db) => this.call(db, 'wf_progress', [json(report), 'jsonb']));
        if (!ok) {
            this.finished = 'stale';
            this.throwLost('wf_progress found the token stale');
        }
    }
    /**
     * A transaction on the job's connection for the job's side effect and its completion, so that
     * both commit or neither does (exactly-once effects):
     *
     * ```ts
     * await job.transaction(async (tx) => {
     *   await tx.query('INSERT INTO sent (message_id) VALUES ($1)', [id]);
     *   await job.complete({ messageId: id });
     * });
     * ```
     *
     * Resolves with `fn`'s value once committed. If `complete` finds the token stale, the block is
     * rolled back and left (the rest of `fn` does not run), this resolves with undefined, and the
     * handler goes on after it (`job.lost` is true). Any other error rolls back and is rethrown.
     */
    async transaction(fn) {
        if (this.inTransaction)
            throw new Error('pg_wf: job.transaction() is already open');
        this.check();
        await this.client.query('BEGIN');
        this.inTransaction = true;
        let value;
        try {
            value = await fn(this.client);
        }
        catch (err) {
            this.inTransaction = false;
            await this.client.query('ROLLBACK').catch(() => undefined);
            if (err instanceof Rollback)
                return undefined;
            if (this.finished === 'completed')
                this.finished = undefined; // its completion rolled back
            throw err;
        }
        this.inTransaction = false;
        try {
            await this.client.query('COMMIT');
        }
        catch (err) {
            if (this.finished === 'completed')
                this.finished = undefined;
            throw err;
        }
        return value;
    }
    /**
     * Completes the job now (`wf_complete`, or `wf_complete_with_steps` with `steps`, or steps
     * given to `addSteps`); the handler's return value is then not used. True if it was still
     * yours. A stale token is logged and returns false; inside `transaction()` it rolls the block
     * back; in a transaction of the handler's own it throws `JobLost`, so that the transaction's
     * effects do not commit.
     */
    async complete(result, steps) {
        if (this.finished !== undefined)
            throw new Error(`pg_wf: ${this} already ended (${this.finished})`);
        const all = [...this.steps, ...(steps ?? [])];
        this.finished = 'completing'; // the heartbeats stop here
        let ok;
        try {
            ok =
                all.length > 0
                    ? await this.call(this.client, 'wf_complete_with_steps', [json((result ?? null)), 'jsonb'], [json(all), 'jsonb'])
                    : await this.call(this.client, 'wf_complete', [json((result ?? null)), 'jsonb']);
        }
        catch (err) {
            this.finished = undefined;
            throw err;
        }
        if (ok) {
            this.finished = 'completed';
            this.host.logger.debug(`pg_wf: ${this}: completed`);
            return true;
        }
        this.markLost('wf_complete refused a stale token');
        this.logStale('wf_complete');
        // Refused in a transaction that rolls back: a job whose cancel was requested is still running
        // (wf_complete would have ended it cancelled), so the worker ends its attempt after the handler.
        const rolledBack = this.inTransaction || this.host.txStatus() !== 'I';
        this.finished = rolledBack ? 'refused' : 'stale';
        if (this.inTransaction)
            throw new Rollback();
        if (rolledBack)
            throw new JobLost(this.lostReason);
        return false;
    }
    // ------------------------------------------------------------------ internals
    /** SELECT fn(queue, id, attempt, args..., named...) on `db`. @internal */
    async call(db, fn, ...args) {
        const positional = [[this.queue, 'text'], [this.id, 'bigint'], [this.attempt, 'int']];
        let named = {};
        for (const a of args) {
            if (Array.isArray(a))
                positional.push(a);
            else
                named = a;
        }
        const q = call(fn, positional, named);
        const res = await db.query(`SELECT ${q.text} AS v`, q.values);
        return res.rows[0].v;
    }
    /** @internal */
    logStale(fn) {
        this.host.logger.warn(`pg_wf: ${this}: ${fn} refused a stale token (the job was cancelled, recovered, or given back); nothing recorded`);
    }
    /** Marks the job lost and aborts `signal`. @internal */
    markLost(reason) {
        if (!this.signal.aborted) {
            this.lostReason = reason;
            this.abort.abort(new JobLost(reason));
        }
    }
    throwLost(reason) {
        this.markLost(reason);
        throw new JobLost(this.lostReason);
    }
    check() {
        if (this.signal.aborted)
            throw new JobLost(this.lostReason);
    }
    notInTransaction(what) {
        if (this.inTransaction || this.host.txStatus() !== 'I') {
            throw new Error(`pg_wf: job.${what}() parks the job and ends the handler's run: call it outside a transaction (its rollback would undo the park)`);
        }
    }
    /** Runs a call that parks the job; the heartbeats stop meanwhile. */
    async parking(park) {
        this.check();
        this.finished = 'parking';
        try {
            return await park();
        }
        catch (err) {
            this.finished = undefined;
            throw err;
        }
    }
    park(status, what) {
        if (status === null) {
            this.finished = 'stale';
            this.throwLost(`${what}: the token is stale`);
        }
        if (status === 'cancelled') {
            this.finished = 'cancelled';
            this.throwLost(`${what}: the job was cancelled`);
        }
        this.finished = 'parked';
        throw new Suspended(status, what);
    }
}
