import type pg from 'pg';
import type { ChildOutcome, Duration, Json, StepSpec, WorkflowSpec } from './types.js';
/** A claim's row, as wf_claim returns it. */
export interface ClaimRow {
    id: string | number;
    attempt: number;
    queue: string;
    payload: Json;
    workflow_id: string | null;
    step_name: string | null;
    priority: number;
    max_attempts: number;
    idempotency_key: string | null;
    inputs: Record<string, Json> | null;
    lease_expires_at: Date | null;
    checkpoints: Record<string, Json> | null;
    events: Record<string, any> | null;
}
export declare const CHILD_EVENT = "wf:child:";
export declare const SLEEP_CHECKPOINT = "pg_wf.sleep:";
/**
 * One claimed job, given to its handler. Every call it makes for the job is fenced by the
 * attempt's token: once the job is no longer this attempt's (recovered, cancelled, timed out,
 * given back), a call that needs the token throws `JobLost` and the handler stops; the worker
 * logs it and writes nothing more.
 */
export declare class Job<P = any, R = any> {
    readonly queue: string;
    readonly id: number;
    /** this attempt's number (1 on the first run; a retried or recovered job counts on) */
    readonly attempt: number;
    readonly payload: P;
    /** results of the jobs this one runs after, by step name (`{}` if none) */
    readonly inputs: Record<string, Json>;
    readonly workflowId: string | null;
    /** its workflow step's name */
    readonly step: string | null;
    readonly priority: number;
    readonly maxAttempts: number;
    readonly leaseExpiresAt: Date | null;
    /** outputs recorded by `checkpoint` in this and earlier runs, by name */
    readonly checkpoints: Record<string, Json>;
    /** events delivered to the job: signals, timeouts, children's outcomes (`wf:child:<name>`) */
    readonly events: Record<string, any>;
    /**
     * The session that owns the job (a pg.Client in autocommit), for the handler's own statements;
     * `transaction()` runs a transaction on it.
     */
    readonly client: pg.Client;
    /** the name of the worker slot that claimed it (wf.jobs.worker) */
    readonly workerName: string;
    /** aborted once the job is no longer this attempt's (`lost`): a long handler should stop */
    readonly signal: AbortSignal;
    private readonly enqueueKey;
    private readonly host;
    private readonly abort;
    private readonly steps;
    private readonly children;
    private sleeps;
    private inTransaction;
    toString(): string;
    /** The fencing token (queue, id, attempt) of this claim. */
    get token(): [queue: string, id: number, attempt: number];
    /**
     * A key for outside APIs (an `Idempotency-Key` header): the enqueue's idempotency key, else
     * `<prefix>:<queue>:<id>` (prefix `pg_wf` unless the worker's `keyPrefix` says otherwise). The
     * same for every attempt and recovery of this job, never per attempt: a retry after a crash that
     * came after the outside call must present the same key, or the outside API does it twice.
     */
    get idempotencyKey(): string;
    /**
     * True once a heartbeat (or another call) found the job no longer this attempt's: cancelled,
     * recovered, past its max_run_time, or given back at shutdown. Stop working on it.
     */
    get lost(): boolean;
    /**
     * Runs `fn` once across attempts: its value (JSON; undefined is stored as null) is recorded
     * with `wf_checkpoint`, and a later run (after a crash, a retry, a park) gets it back from its
     * claim without running `fn` again. Inside `transaction()` the record commits with the block.
     */
    checkpoint<T extends Json>(name: string, fn: () => T | Promise<T>): Promise<T>;
    /**
     * A durable sleep: parks the job (`wf_snooze`: pending, no worker, no attempt spent) and ends
     * this run (throws `Suspended`); the handler runs again after `delay` (ms, or an interval as
     * text), and this call then returns at once. The sleep is a checkpoint (`pg_wf.sleep:<name>`);
     * unnamed sleeps are numbered in call order, so a handler must make them in the same order on
     * every run.
     */
    sleep(delay: Duration, name?: string): Promise<void>;
    /**
     * The payload of `event` once it was signalled (`wf_signal`). Until then, parks the job
     * (`wf_await_event`: waiting, no worker, no attempt spent) and ends this run (throws
     * `Suspended`); the handler runs again when the signal arrives (at once if it was signalled
     * before: signals are kept), and this call then returns the payload. After the timeout it
     * throws `EventTimeout`. Event names are per job: awaiting one twice returns the first delivery.
     */
    awaitEvent<T extends Json = Json>(event: string, options?: {
        timeout?: Duration;
    }): Promise<T>;
    /**
     * Starts the child workflow `name` (`wf_start_child`; `spec` is what `submit` takes, a single
     * job is a one-step spec) and returns its id. The same name again, in this run or a later one,
     * returns the same child: start them on every run, before `awaitChildren`.
     */
    startChild(name: string, spec: WorkflowSpec): Promise<string>;
    /**
     * The outcomes of the children started with `startChild`, by name, once all have finished.
     * Until then parks the job (`wf_await_children`) and ends this run (throws `Suspended`); the
     * handler runs again with the outcomes in its events. A child that failed is an outcome with
     * status `failed`, not an error. After the timeout: `ChildrenTimeout` (with the outcomes that
     * arrived).
     */
    awaitChildren(options?: {
        timeout?: Duration;
    }): Promise<Record<string, ChildOutcome>>;
    /** The child outcomes delivered so far (from the claim's events), by child name. */
    childOutcomes(): Record<string, ChildOutcome>;
    /**
     * Fan-out at run time: steps (`submit`'s step objects) added to this job's workflow when it
     * completes, in the same statement (`wf_complete_with_steps`). Their `after` may name this step,
     * other new steps and done steps; `queue` defaults to this step's.
     */
    addSteps(steps: StepSpec[]): void;
    /**
     * Tells pg_wf the job is alive and extends its lease (`wf_heartbeat`). The worker does this by
     * itself, well inside the lease; call it only to learn at once whether the job is still yours.
     * Throws `JobLost` if it is not.
     */
    heartbeat(): Promise<void>;
    /**
     * Reports progress (`wf_progress`: a small JSON value, up to 8 kB, shown in `wf.jobs.progress`
     * and `wf_workflow`; no WAL). Throws `JobLost` if the job is no longer yours.
     */
    progress(report: Json): Promise<void>;
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
    transaction<T>(fn: (tx: pg.Client) => Promise<T>): Promise<T | undefined>;
    /**
     * Completes the job now (`wf_complete`, or `wf_complete_with_steps` with `steps`, or steps
     * given to `addSteps`); the handler's return value is then not used. True if it was still
     * yours. A stale token is logged and returns false; inside `transaction()` it rolls the block
     * back; in a transaction of the handler's own it throws `JobLost`, so that the transaction's
     * effects do not commit.
     */
    complete(result?: R | Json, steps?: StepSpec[]): Promise<boolean>;
    private throwLost;
    private check;
    private notInTransaction;
    /** Runs a call that parks the job; the heartbeats stop meanwhile. */
    private parking;
    private park;
}
