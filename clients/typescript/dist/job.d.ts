import type pg from 'pg';
import type { Logger } from './logger.js';
import type { ChildOutcome, Duration, Json, Queryable, StepSpec, WorkflowSpec } from './types.js';
/** What a job's handler is at when it ends; the worker reads it to know what is left to do. */
export type JobState = 'running' | 'completed' | 'suspended' | 'lost' | 'given_back';
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
/** What the worker lends a job: the connection for heartbeats and progress, and its logger. */
export interface JobHost {
    control: Queryable;
    logger: Logger;
    idempotencyKeyPrefix: string;
}
/**
 * One claimed attempt of a job, given to its handler. Everything a running job asks of pg_wf goes
 * through it; each call is fenced by the attempt's token, so a handler whose job was taken away
 * (recovered, cancelled, given back) changes nothing: the call throws `JobLostError` (or returns
 * false, for `heartbeat` and `progress`), the handler stops, and the worker logs it.
 */
export declare class Job<P = Json, R = Json> {
    readonly queue: string;
    readonly id: number;
    /** this attempt's number (1 for the first run; a recovered or retried job counts on) */
    readonly attempt: number;
    readonly payload: P;
    /** results of the jobs this one ran after, by step name (`{}` if none) */
    readonly inputs: Record<string, Json>;
    /** outputs recorded by `checkpoint` in earlier attempts, by name */
    readonly checkpoints: Record<string, Json>;
    /** events delivered to the job: signals, timeouts, children's outcomes (`wf:child:<name>`) */
    readonly events: Record<string, any>;
    readonly workflowId: string | null;
    readonly stepName: string | null;
    readonly priority: number;
    readonly maxAttempts: number;
    readonly leaseExpiresAt: Date | null;
    /**
     * A key for outside APIs (an `Idempotency-Key` header), the same in every attempt and after
     * every recovery of this job: the enqueue's idempotency key if it had one, else
     * `<prefix>:<queue>:<id>` (prefix `pg_wf` unless the worker names another). An API that
     * remembers keys then executes a request once however often the job runs. Never per attempt.
     */
    readonly idempotencyKey: string;
    /**
     * The job's own connection: the session that owns the claim (a pg.Client of the worker). Use it
     * for the queries whose effect must commit with the job's completion (see `completeWith`).
     */
    readonly db: pg.Client;
    /** Aborted when the job stops being this attempt's (cancelled, lost, timed out, given back). */
    readonly signal: AbortSignal;
    /** @internal */ state: JobState;
    /** @internal */ readonly children: Map<string, string>;
    private readonly abort;
    private readonly host;
    /** @internal */
    constructor(row: ClaimRow, db: pg.Client, host: JobHost);
    /** `queue/id#attempt`, for log lines. */
    toString(): string;
    private token;
    private value;
    /** @internal Marks the job as not this attempt's any more and aborts `signal`. */
    markLost(reason: string, state?: JobState): void;
    private lost;
    private suspend;
    private checkRunning;
    /**
     * Runs `fn` once across attempts: its output is recorded with `wf_checkpoint` under `name`, and
     * a later attempt (after a crash, a retry, a sleep) gets the recorded output back without
     * running `fn`. The output must be JSON (undefined is stored as null). Names are per job.
     */
    checkpoint<T extends Json>(name: string, fn: () => T | Promise<T>): Promise<T>;
    /**
     * A durable sleep: the job goes back to pending until `duration` has passed (`wf_snooze`),
     * holding no session or lease, its attempt not spent, and the handler stops here (this throws
     * `JobSuspended`). At the next claim the handler runs again from the start; its checkpoints
     * return their outputs, and this call, with the same name, returns at once once the time has
     * come. `name` makes the sleep one point of the job (like a checkpoint's name).
     */
    sleep(name: string, duration: Duration): Promise<void>;
    /**
     * Waits for an event (`wf_await_event`). If the event was delivered already (a signal, kept by
     * the server, or this job's timeout), returns it; otherwise the job parks as `waiting`, holding
     * nothing, and the handler stops here (this throws `JobSuspended`); the signal (or the timeout)
     * makes the job ready again, and the handler's next run gets the event from this call.
     * Event names are per job: awaiting one name twice returns the first delivery.
     */
    awaitEvent<T extends Json = Json>(event: string, options?: {
        timeout?: Duration;
    }): Promise<{
        status: 'signalled';
        payload: T;
    } | {
        status: 'timed_out';
    }>;
    /**
     * Starts a child workflow named `name` (`wf_start_child`; a single job is a one-step spec).
     * The same name again, in any attempt, returns the same child: call it again on every run.
     * Returns the child workflow's id.
     */
    startChild(name: string, spec: WorkflowSpec): Promise<string>;
    /**
     * Waits until every child started in this run (by `startChild`) has finished, and returns their
     * outcomes by name. Until then the job parks (`wf_await_children`: waiting, its attempt not
     * spent) and the handler stops here (this throws `JobSuspended`); the last child's end makes it
     * ready, and the next run, starting the same children again, gets their outcomes from this
     * call. A child that failed does not fail the parent: look at each outcome's `status`. After
     * `timeout`, the children still running come back with status `running`.
     */
    awaitChildren(options?: {
        timeout?: Duration;
    }): Promise<Record<string, ChildOutcome>>;
    /**
     * Tells the server this attempt is alive (`wf_heartbeat`, extending a lease). The worker does
     * it by itself well inside the lease; call it only to learn at once whether to go on. False: the
     * job is not this attempt's any more (cancelled, past its max_run_time, recovered) and `signal`
     * is aborted: stop.
     */
    heartbeat(): Promise<boolean>;
    /**
     * Reports progress (`wf_progress`, up to 8 kB of JSON), shown in `wf.jobs.progress` and in
     * `wf_workflow`. False (and `signal` aborted) if the job is not this attempt's any more.
     */
    progress(value: Json): Promise<boolean>;
    /**
     * Exactly-once effects: runs `fn` in a transaction on the job's own connection (`tx` is
     * `job.db`), then completes the job with `fn`'s result in the same transaction, and commits. If
     * the job is no longer this attempt's, the completion is refused, the transaction (with the
     * effect) is rolled back and this throws `JobLostError`; so the effect commits if and only if
     * the job completes. With `steps`, the completion also adds those steps to the job's workflow
     * (`wf_complete_with_steps`). The handler's own return value is then not used.
     */
    completeWith<T extends R>(fn: (tx: pg.Client) => T | Promise<T>, options?: {
        steps?: StepSpec[];
    }): Promise<T>;
    /**
     * Fan-out at run time: completes this workflow step with `result` and adds `steps` to its
     * workflow in one statement (`wf_complete_with_steps`). A step's `after` may name the new steps
     * and done steps (this one counts as done); `queue` defaults to this step's.
     */
    completeWithSteps(result: R, steps: StepSpec[]): Promise<void>;
    private finishCall;
    /** @internal The worker's completion with the handler's return value. */
    complete(result: Json): Promise<boolean>;
    /** @internal The worker's `wf_fail`; returns the new status, or null for a stale token. */
    fail(db: Queryable, error: string, options?: {
        retryIn?: Duration;
        permanent?: boolean;
    }): Promise<string | null>;
}
