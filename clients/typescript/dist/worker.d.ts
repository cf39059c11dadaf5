import pg from 'pg';
import { Job } from './job.js';
import { type Logger } from './logger.js';
import type { Duration } from './types.js';
/** A handler: gets the job, returns its result (JSON), throws to fail the attempt. */
export type Handler<P = any, R = any> = (job: Job<P, R>) => R | void | Promise<R | void>;
export interface RegisterOptions {
    /** only the jobs of this workflow step (a queue's handler without `step` takes the others) */
    step?: string;
    /** jobs of the queue run at once by this worker, each on its own connection (default: the worker's, 1) */
    concurrency?: number;
}
export interface WorkerOptions {
    /**
     * A connection string (a URL, or libpq's `host=... dbname=...`) or a node-postgres client
     * config; default: the PG* environment variables.
     */
    connection?: string | pg.ClientConfig;
    /** this worker's name in `wf.jobs.worker` (default `<hostname>:<pid>`; slots add `/<queue>/<n>`) */
    name?: string;
    /** claim only jobs of these versions (default: any job) */
    versions?: string[];
    /** the claims' lease, a heartbeat deadline (default: the queue's, else `wf.default_lease`) */
    lease?: Duration;
    /** jobs in flight per queue when its registration does not say (default 1) */
    concurrency?: number;
    /** how long one waiting claim blocks in the server before it is made again (default 10 s) */
    claimWait?: Duration;
    /** the most time between two heartbeats of a job, in ms (default 10 s); with a lease, a third of it at most */
    heartbeatEvery?: number;
    /** how long in-flight jobs may take to finish after a stop, in ms (default 30 s) */
    shutdownTimeout?: number;
    /** the retry delay of a job given back at shutdown (default 1 s) */
    shutdownRetryIn?: Duration;
    /** the prefix of the idempotency keys derived from (queue, id) (default `pg_wf`) */
    keyPrefix?: string;
    /** stop gracefully on SIGTERM and SIGINT while `run()` runs (default true) */
    handleSignals?: boolean;
    /** where the worker logs; default: warnings and errors to the console (`PG_WF_LOG_LEVEL` sets the level) */
    logger?: Logger;
}
/**
 * Runs handlers on the jobs of their queues.
 *
 * ```ts
 * const worker = new Worker({ connection: process.env.DATABASE_URL });
 * worker.register('emails', async (job) => ({ sent: await send(job.payload) }), { concurrency: 4 });
 * await worker.run(); // until SIGTERM or SIGINT
 * ```
 */
export declare class Worker {
    readonly name: string;
    readonly logger: Logger;
    readonly keyPrefix: string;
    private readonly versions;
    private readonly lease;
    private readonly concurrency;
    private readonly claimWait;
    private readonly heartbeatEvery;
    private readonly shutdownTimeout;
    private readonly shutdownRetryIn;
    private readonly handleSignals;
    private readonly config;
    private readonly queues;
    private readonly slots;
    private readonly running;
    private readonly control;
    private readonly stopSignal;
    private started;
    private stopping;
    private stopReason;
    private forced;
    private readonly force;
    private readonly done;
    constructor(options?: WorkerOptions);
    /**
     * Registers `handler` for the jobs of `queue` (of its workflow step `options.step`, if given).
     * Its return value is the job's result. Call before `start` / `run`.
     */
    register<P = any, R = any>(queue: string, handler: Handler<P, R>, options?: RegisterOptions): this;
    /** The jobs whose handlers run now. */
    get inFlight(): Job[];
    /** Resolves once the worker has stopped. */
    get stopped(): Promise<void>;
    /**
     * Starts the slots and resolves at once; `stop()` ends them. The control connection is opened
     * first, so that a bad connection string rejects here.
     */
    start(): Promise<this>;
    /**
     * Starts, and resolves once the worker has shut down: after SIGTERM or SIGINT (unless
     * `handleSignals` is false; a second signal gives the jobs in flight back at once), or `stop()`.
     */
    run(): Promise<void>;
    /**
     * Shuts down: no new claims (the waiting ones are cancelled); jobs in flight get `timeout` ms
     * (default `shutdownTimeout`) to finish; then those still running are given back with
     * `wf_fail(retry_in => shutdownRetryIn)` (the attempt counts, as a lost worker's does), their
     * `signal` aborted and their sessions ended. `force`: give them back now. Resolves once stopped.
     */
    stop(options?: {
        timeout?: number;
        force?: boolean;
    }): Promise<void>;
    private shutdown;
    private drain;
    /** Cancels the claims that wait (again while a slot is still in one: its claim may not have reached the server). */
    private cancelWaitingClaims;
    private giveBack;
    /** Ends a slot's session now (a busy backend reads no Terminate message until its statement ends). */
    private endSession;
    private slotLoop;
    private claim;
    private handlerFor;
    /** Runs one job; 'abandoned' when it was given back at shutdown. */
    private execute;
    private heartbeats;
    /** Records how the handler ended, as the job context left it. */
    private finish;
    private fail;
    /** Ends an attempt the handler gave up on: a job whose cancel was requested ends `cancelled` only when its attempt ends. */
    private endLost;
}
