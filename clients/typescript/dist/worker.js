// The Worker: handlers per queue, one connection per job in flight (a claim belongs to the
// session that made it), waiting claims, heartbeats, and a graceful shutdown.
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { connectionConfig } from './dsn.js';
import { JobLostError, PermanentError, RetryError, formatError } from './errors.js';
import { Job } from './job.js';
import { defaultLogger } from './logger.js';
import { interval } from './sql.js';
const CLAIM_SQL = `SELECT c.*, extract(epoch FROM c.lease_expires_at - clock_timestamp()) AS lease_left
  FROM wf_claim($1::text, worker => $2::text, max_jobs => 1, lease => $3::interval,
                wait => $4::interval, versions => $5::text[]) c`;
function deferred() {
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    return { promise, resolve };
}
function clientConfig(connection, name) {
    const base = typeof connection === 'string' ? connectionConfig(connection) : { ...(connection ?? {}) };
    return { application_name: `pg_wf worker ${name}`.slice(0, 63), keepAlive: true, ...base };
}
/** A connection of the worker's own: made on first use, made again after it broke; one statement at a time. */
class Connection {
    config;
    logger;
    label;
    client;
    pid;
    /** the transaction status of the last ReadyForQuery: I (idle), T (in a transaction), E (failed one) */
    txStatus = 'I';
    connecting;
    chain = Promise.resolve();
    constructor(config, logger, label) {
        this.config = config;
        this.logger = logger;
        this.label = label;
    }
    async get() {
        if (this.client)
            return this.client;
        if (!this.connecting) {
            this.connecting = (async () => {
                const client = new pg.Client(this.config);
                client.on('error', (err) => {
                    this.logger.warn(`pg_wf: ${this.label} connection error: ${err.message}`);
                    if (this.client === client)
                        this.drop();
                });
                client.on('end', () => {
                    if (this.client === client)
                        this.drop();
                });
                try {
                    await client.connect();
                }
                catch (err) {
                    client.end().catch(() => undefined);
                    throw err;
                }
                const conn = client.connection;
                conn?.on('readyForQuery', (msg) => {
                    if (typeof msg?.status === 'string')
                        this.txStatus = msg.status;
                });
                this.txStatus = 'I';
                this.pid = client.processID ?? undefined;
                this.client = client;
                return client;
            })().finally(() => (this.connecting = undefined));
        }
        return this.connecting;
    }
    drop() {
        this.client = undefined;
        this.pid = undefined;
    }
    async query(text, values) {
        return this.exclusive(async () => (await this.get()).query(text, values));
    }
    /** Runs fn with the connection to itself (no other caller's statement in between). */
    exclusive(fn) {
        const run = this.chain.then(fn, fn);
        this.chain = run.catch(() => undefined);
        return run;
    }
    async close() {
        const client = this.client;
        this.drop();
        if (client)
            await client.end().catch(() => undefined);
    }
}
/** One job at a time of one queue, on one connection of its own. */
class Slot {
    worker;
    reg;
    index;
    conn;
    claiming = false;
    loop = Promise.resolve();
    constructor(worker, reg, index, config) {
        this.worker = worker;
        this.reg = reg;
        this.index = index;
        this.conn = new Connection(config, worker.logger, `${reg.queue}[${index}]`);
    }
    toString() {
        return `${this.reg.queue}[${this.index}]`;
    }
}
/**
 * Runs registered handlers on the jobs of their queues.
 *
 * ```ts
 * const worker = new Worker({ connection: process.env.DATABASE_URL, concurrency: 4 });
 * worker.handle('emails', async (job) => ({ messageId: await send(job.payload) }));
 * await worker.run(); // until SIGTERM or SIGINT
 * ```
 */
export class Worker {
    name;
    logger;
    options;
    config;
    registrations = new Map();
    slots = [];
    inFlight = new Set();
    control;
    host;
    stopSignal = new AbortController();
    started = false;
    stopping;
    hurry = deferred();
    done = deferred();
    constructor(options = {}) {
        this.name = options.name ?? `${hostname()}:${process.pid}`;
        this.logger = options.logger ?? defaultLogger();
        this.options = {
            concurrency: 1,
            claimWait: 30_000,
            heartbeatInterval: 10_000,
            shutdownTimeout: 30_000,
            giveBackRetryIn: 1000,
            handleSignals: true,
            idempotencyKeyPrefix: 'pg_wf',
            ...options,
        };
        this.config = clientConfig(options.connection, this.name);
        this.control = new Connection(this.config, this.logger, 'control');
        this.host = { control: this.control, logger: this.logger, idempotencyKeyPrefix: this.options.idempotencyKeyPrefix };
    }
    /** Registers the handler of `queue`'s jobs (before `start`/`run`). */
    handle(queue, handler, options = {}) {
        if (this.started)
            throw new Error('pg_wf: register handlers before the worker starts');
        if (this.registrations.has(queue))
            throw new Error(`pg_wf: queue "${queue}" has a handler already`);
        const concurrency = options.concurrency ?? this.options.concurrency;
        if (!Number.isInteger(concurrency) || concurrency < 1)
            throw new RangeError('pg_wf: concurrency must be a positive integer');
        this.registrations.set(queue, {
            queue,
            handler: handler,
            concurrency,
            lease: options.lease ?? this.options.lease,
            versions: options.versions ?? this.options.versions,
        });
        return this;
    }
    /** Jobs whose handlers run now. */
    get activeJobs() {
        return this.inFlight.size;
    }
    /** True once a stop began. */
    get isStopping() {
        return this.stopping !== undefined;
    }
    /** Starts claiming; returns at once. `stop()` ends it; `stopped` resolves then. */
    start() {
        if (this.started)
            throw new Error('pg_wf: the worker was started already');
        if (this.registrations.size === 0)
            throw new Error('pg_wf: no handler registered');
        this.started = true;
        for (const reg of this.registrations.values()) {
            for (let i = 0; i < reg.concurrency; i++) {
                const slot = new Slot(this, reg, i, this.config);
                this.slots.push(slot);
                slot.loop = this.slotLoop(slot);
            }
        }
        const queues = [...this.registrations.values()].map((r) => `${r.queue} x${r.concurrency}`).join(', ');
        this.logger.info(`pg_wf: worker ${this.name} started: ${queues}`);
    }
    /** Resolves when the worker has stopped. */
    get stopped() {
        return this.done.promise;
    }
    /**
     * Starts, and runs until stopped: by `stop()`, or by SIGTERM / SIGINT (unless `handleSignals`
     * is false), which stop gracefully; a second signal gives the jobs in flight back at once.
     */
    async run() {
        this.start();
        const onSignal = (sig) => {
            if (this.stopping) {
                this.logger.warn(`pg_wf: ${sig} again: giving the jobs in flight back now`);
                void this.stop({ timeout: 0 });
            }
            else {
                this.logger.info(`pg_wf: ${sig}: stopping (in-flight jobs have ${this.options.shutdownTimeout} ms)`);
                void this.stop();
            }
        };
        if (this.options.handleSignals) {
            process.on('SIGTERM', onSignal);
            process.on('SIGINT', onSignal);
        }
        try {
            await this.done.promise;
        }
        finally {
            if (this.options.handleSignals) {
                process.off('SIGTERM', onSignal);
                process.off('SIGINT', onSignal);
            }
        }
    }
    /**
     * Stops gracefully: no new claims (waiting ones are cancelled), the jobs in flight get
     * `timeout` ms (default `shutdownTimeout`) to finish, then the rest are given back with
     * `wf_fail` and a short retry (the attempt counts, as a lost worker's does), their `signal`
     * aborted and their connections closed. Resolves once the worker has stopped.
     */
    stop(options = {}) {
        const timeout = options.timeout ?? this.options.shutdownTimeout;
        if (!this.started) {
            this.started = true;
            this.done.resolve();
            return this.done.promise;
        }
        if (this.stopping) {
            if (timeout <= 0)
                this.hurry.resolve();
            return this.stopping;
        }
        this.stopping = this.shutdown(timeout);
        return this.stopping;
    }
    async shutdown(timeout) {
        this.stopSignal.abort();
        const cancelling = this.cancelWaitingClaims();
        if (timeout <= 0)
            this.hurry.resolve();
        const timer = setTimeout(() => this.hurry.resolve(), Math.max(0, timeout));
        try {
            while (this.inFlight.size > 0) {
                const pending = [...this.inFlight].map((f) => f.settled.promise);
                const hurried = await Promise.race([Promise.all(pending).then(() => false), this.hurry.promise.then(() => true)]);
                if (hurried)
                    break;
            }
        }
        finally {
            clearTimeout(timer);
        }
        if (this.inFlight.size > 0)
            await this.giveBack(timeout);
        await Promise.all(this.slots.map((s) => s.loop));
        await cancelling;
        await this.control.close();
        this.logger.info(`pg_wf: worker ${this.name} stopped`);
        this.done.resolve();
    }
    /** Cancels the claims that are waiting (and again while a slot is still in one). */
    async cancelWaitingClaims() {
        for (let round = 0; this.slots.some((s) => s.claiming); round++) {
            for (const slot of this.slots) {
                if (!slot.claiming || slot.conn.pid === undefined)
                    continue;
                try {
                    // Only while the claim itself runs: a cancel that reached a handler's statement would fail it.
                    await this.control.query(`SELECT pg_cancel_backend(pid) FROM pg_stat_activity
              WHERE pid = $1 AND state = 'active' AND query LIKE '%wf_claim(%'`, [slot.conn.pid]);
                }
                catch (err) {
                    this.logger.debug(`pg_wf: could not cancel the waiting claim of ${slot}: ${err.message}`);
                }
            }
            await delay(round < 10 ? 100 : 1000);
        }
    }
    async giveBack(timeout) {
        const entries = [...this.inFlight].filter((f) => f.phase === 'handler');
        for (const f of entries) {
            const { job, slot } = f;
            job.markLost('given back at shutdown', 'given_back');
            f.abandoned.resolve({ abandoned: true });
            const error = `worker ${this.name} shut down: the handler did not finish within ${timeout} ms; given back`;
            const fail = () => this.control.exclusive(async () => {
                const c = await this.control.get();
                await c.query('BEGIN');
                try {
                    await c.query(`SET LOCAL lock_timeout = '2s'`);
                    const status = await job.fail(c, error, { retryIn: this.options.giveBackRetryIn });
                    await c.query('COMMIT');
                    return status;
                }
                catch (err) {
                    await c.query('ROLLBACK').catch(() => undefined);
                    throw err;
                }
            });
            let status;
            try {
                status = await fail();
            }
            catch (err) {
                this.logger.debug(`pg_wf: giving back ${job} waits for its handler's transaction: ${err.message}`);
            }
            await this.closeSlot(slot);
            if (status === undefined) {
                try {
                    status = await fail();
                }
                catch (err) {
                    this.logger.error(`pg_wf: could not give back ${job}: ${err.message}; the server recovers it`);
                }
            }
            this.logger.warn(status === null
                ? `pg_wf: job ${job} was not this attempt's any more at shutdown`
                : `pg_wf: job ${job} given back at shutdown (now ${status ?? 'recovered by the server'})`);
            this.inFlight.delete(f);
            f.settled.resolve();
        }
        // Those finishing now (their completion under way) are let through.
        await Promise.all([...this.inFlight].map((f) => f.settled.promise));
    }
    /** Ends a slot's session at once (a busy backend reads no Terminate message until its statement ends). */
    async closeSlot(slot) {
        const pid = slot.conn.pid;
        if (pid !== undefined) {
            await this.control.query('SELECT pg_terminate_backend($1)', [pid]).catch((err) => {
                this.logger.debug(`pg_wf: could not terminate the session of ${slot}: ${err.message}`);
            });
        }
        await slot.conn.close();
    }
    async slotLoop(slot) {
        const reg = slot.reg;
        let backoff = 500;
        while (!this.stopSignal.signal.aborted) {
            try {
                const client = await slot.conn.get();
                if (this.stopSignal.signal.aborted)
                    break;
                slot.claiming = true;
                let res;
                try {
                    res = await client.query(CLAIM_SQL, [
                        reg.queue,
                        this.name,
                        interval(reg.lease) ?? null,
                        interval(this.options.claimWait),
                        reg.versions ?? null,
                    ]);
                }
                finally {
                    slot.claiming = false;
                }
                backoff = 500;
                if (res.rows.length > 0 && (await this.runJob(slot, res.rows[0])) === 'abandoned')
                    return;
            }
            catch (err) {
                const e = err;
                if (this.stopSignal.signal.aborted && e.code === '57014')
                    break;
                this.logger.error(`pg_wf: ${slot}: ${e.message}; again in ${backoff} ms`);
                await slot.conn.close();
                await delay(backoff, undefined, { signal: this.stopSignal.signal }).catch(() => undefined);
                backoff = Math.min(backoff * 2, 30_000);
            }
        }
        await slot.conn.close();
    }
    /** Runs one job; 'abandoned' when it was given back at shutdown (its session is closed by giveBack). */
    async runJob(slot, row) {
        const client = slot.conn.client;
        const job = new Job(row, client, this.host);
        const f = { job, slot, phase: 'handler', settled: deferred(), abandoned: deferred() };
        this.inFlight.add(f);
        this.logger.debug(`pg_wf: job ${job} claimed`);
        const lease = row.lease_left === null || row.lease_left === undefined ? undefined : Number(row.lease_left) * 1000;
        const every = lease === undefined ? this.options.heartbeatInterval : Math.max(100, Math.min(this.options.heartbeatInterval, lease / 3));
        let beating = false;
        const timer = setInterval(() => {
            if (beating || job.state !== 'running')
                return;
            beating = true;
            job
                .heartbeat()
                .then((ok) => {
                if (!ok)
                    this.logger.warn(`pg_wf: job ${job}: heartbeat refused (cancelled, past its max_run_time or recovered); its signal is aborted`);
            })
                .catch((err) => this.logger.warn(`pg_wf: job ${job}: heartbeat failed: ${err.message}`))
                .finally(() => (beating = false));
        }, every);
        try {
            const run = Promise.resolve()
                .then(() => slot.reg.handler(job))
                .then((value) => ({ ok: true, value }), (error) => ({ ok: false, error }));
            const outcome = await Promise.race([run, f.abandoned.promise]);
            if ('abandoned' in outcome) {
                void run.then((o) => {
                    if (!o.ok && !(o.error instanceof JobLostError)) {
                        this.logger.debug(`pg_wf: job ${job}: its handler, given back, ended with ${formatError(o.error).split('\n')[0]}`);
                    }
                });
                return 'abandoned';
            }
            f.phase = 'finishing';
            clearInterval(timer);
            await this.finish(slot, job, outcome);
            return 'done';
        }
        finally {
            clearInterval(timer);
            if (this.inFlight.delete(f))
                f.settled.resolve();
        }
    }
    /** Records how the handler ended: completion, failure, or nothing (it parked, or lost the job). */
    async finish(slot, job, outcome) {
        const client = job.db;
        try {
            if (slot.conn.txStatus !== 'I') {
                if (job.state === 'running' || outcome.ok) {
                    this.logger.warn(`pg_wf: job ${job}: its handler left a transaction open on job.db; rolled back`);
                }
                await client.query('ROLLBACK');
            }
            if (job.state === 'completed') {
                this.logger.debug(`pg_wf: job ${job} completed`);
                return;
            }
            if (job.state === 'suspended') {
                this.logger.debug(`pg_wf: job ${job} parked: ${outcome.ok ? 'returned' : outcome.error.message}`);
                return;
            }
            if (outcome.ok) {
                let ok;
                try {
                    ok = await job.complete((outcome.value ?? null));
                }
                catch (err) {
                    const e = err;
                    if (e.code === undefined)
                        throw err;
                    // The result was refused (too large, not JSON): the attempt fails with why.
                    const status = await job.fail(client, `the result could not be stored: ${formatError(err)}`);
                    this.logger.error(`pg_wf: job ${job}: its result could not be stored (${e.message}); ${status ?? 'stale'}`);
                    return;
                }
                if (ok)
                    this.logger.debug(`pg_wf: job ${job} completed`);
                else
                    this.logger.warn(`pg_wf: job ${job}: completion refused: not this attempt's any more (recovered, cancelled or timed out); result not recorded`);
                return;
            }
            const error = outcome.error;
            const status = await job.fail(client, formatError(error), {
                permanent: error instanceof PermanentError,
                retryIn: error instanceof RetryError ? error.retryIn : undefined,
            });
            const first = formatError(error).split('\n')[0];
            if (status === null) {
                this.logger.warn(`pg_wf: job ${job}: not this attempt's any more (recovered, cancelled or timed out); its failure (${first}) was not recorded`);
            }
            else if (status === 'failed') {
                this.logger.error(`pg_wf: job ${job} failed for good: ${first}`);
            }
            else if (status === 'cancelled') {
                this.logger.info(`pg_wf: job ${job} cancelled: ${first}`);
            }
            else {
                this.logger.warn(`pg_wf: job ${job} failed (${status}, retried later): ${first}`);
            }
        }
        catch (err) {
            // The session may be broken; ending it makes the server recover the job.
            this.logger.error(`pg_wf: job ${job}: could not record how it ended (${err.message}); closing its session so that the server recovers it`);
            await this.closeSlot(slot);
        }
    }
}
