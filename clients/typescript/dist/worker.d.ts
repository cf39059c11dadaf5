import pg from 'pg';
import { Job } from './job.js';
import { type Logger } from './logger.js';
import type { Duration } from './types.js';
/** A handler: gets the job, returns its result (JSON), throws to fail the attempt. */
export type Handler<P = any, R = any> = (job: Job<P, R>) => R | void | Promise<R | void>;
export interface HandlerOptions {
    /** jobs of this queue run at once in this worker, each on its own connection (default: the worker's) */
    concurrency?: number;
    /** the claims' lease (a heartbeat deadline); default: the queue's, else none */
    lease?: Duration;
    /** claim only jobs of these versions (default: the worker's, else any) */
    versions?: string[];
}
export interface WorkerOptions {
    /**
     * a connection string (a URL, or libpq's `host=... dbname=...`) or a node-postgres client
     * config; default: the PG* environment variables
     */
    connection?: string | pg.ClientConfig;
    /** this worker's name in `wf.jobs.worker` (default `<hostname>:<pid>`) */
    name?: string;
    /** jobs in flight per queue unless its handler says (default 1) */
    concurrency?: number;
    lease?: Duration;
    versions?: string[];
    /** how long one waiting claim blocks before it is made again (default 30 s); no polling either way */
    claimWait?: Duration;
    /** the longest time between heartbeats of a job without a lease, in ms (default 10 s); with a lease, a third of it */
    heartbeatInterval?: number;
    /** how long in-flight jobs may take to finish after a stop, in ms (default 30 s) */
    shutdownTimeout?: number;
    /** the retry delay of a job given back at shutdown (default 1 s) */
    giveBackRetryIn?: Duration;
    /** stop gracefully on SIGTERM and SIGINT while `run()` runs (default true); a second signal gives back at once */
    handleSignals?: boolean;
    /** where the worker logs (default: warnings and errors to the console; PG_WF_LOG_LEVEL sets the level) */
    logger?: Logger;
    /** the prefix of the idempotency keys derived from (queue, id) (default `pg_wf`) */
    idempotencyKeyPrefix?: string;
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
export declare class Worker {
    readonly name: string;
    readonly logger: Logger;
    private readonly options;
    private readonly config;
    private readonly registrations;
    private readonly slots;
    private readonly inFlight;
    private readonly control;
    private readonly host;
    private readonly stopSignal;
    private started;
    private stopping;
    private hurry;
    private readonly done;
    constructor(options?: WorkerOptions);
    /** Registers the handler of `queue`'s jobs (before `start`/`run`). */
    handle<P = any, R = any>(queue: string, handler: Handler<P, R>, options?: HandlerOptions): this;
    /** Jobs whose handlers run now. */
    get activeJobs(): number;
    /** True once a stop began. */
    get isStopping(): boolean;
    /** Starts claiming; returns at once. `stop()` ends it; `stopped` resolves then. */
    start(): void;
    /** Resolves when the worker has stopped. */
    get stopped(): Promise<void>;
    /**
     * Starts, and runs until stopped: by `stop()`, or by SIGTERM / SIGINT (unless `handleSignals`
     * is false), which stop gracefully; a second signal gives the jobs in flight back at once.
     */
    run(): Promise<void>;
    /**
     * Stops gracefully: no new claims (waiting ones are cancelled), the jobs in flight get
     * `timeout` ms (default `shutdownTimeout`) to finish, then the rest are given back with
     * `wf_fail` and a short retry (the attempt counts, as a lost worker's does), their `signal`
     * aborted and their connections closed. Resolves once the worker has stopped.
     */
    stop(options?: {
        timeout?: number;
    }): Promise<void>;
    private shutdown;
    /** Cancels the claims that are waiting (and again while a slot is still in one). */
    private cancelWaitingClaims;
    private giveBack;
    /** Ends a slot's session at once (a busy backend reads no Terminate message until its statement ends). */
    private closeSlot;
    private slotLoop;
    /** Runs one job; 'abandoned' when it was given back at shutdown (its session is closed by giveBack). */
    private runJob;
    /** Records how the handler ended: completion, failure, or nothing (it parked, or lost the job). */
    private finish;
}
