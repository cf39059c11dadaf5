import type { Duration, Json, Outcome, Queryable, Timestamp, WorkflowSpec } from './types.js';
export interface EnqueueOptions {
    /** not before this time */
    runAt?: Timestamp;
    /** higher runs first (default 0) */
    priority?: number;
    /** the job's budget of attempts (else the queue's, 5 by default) */
    maxAttempts?: number;
    /**
     * the same key again (in this queue, while the job is kept: `wf.retention`) returns the existing
     * job instead of a new one (a different payload is an error); also the job's key for outside
     * APIs (see `Job.idempotencyKey`)
     */
    idempotencyKey?: string;
    workflowId?: string;
    stepName?: string;
    /** ids of jobs this one waits for; their results arrive in `inputs` by step name */
    dependsOn?: number[];
    /** the job's tenant or customer, for flow control */
    key?: string;
    /** while a job holding this key is active, enqueue returns it (`onDuplicate: 'replace'` updates it) */
    dedupKey?: string;
    onDuplicate?: 'keep' | 'replace';
    /** the longest one attempt may run */
    maxRunTime?: Duration;
    /** the job fails if it has not started by then */
    startBy?: Timestamp;
    /** the version of the code that runs it (else the queue's) */
    version?: string;
}
/** Adds a job to `queue`; returns its id (an existing job's, for a repeated idempotency or dedup key). */
export declare function enqueue(db: Queryable, queue: string, payload?: Json, options?: EnqueueOptions): Promise<number>;
/** One job per payload, in one statement; the ids in the payloads' order. */
export declare function enqueueBatch(db: Queryable, queue: string, payloads: Json[], options?: {
    keys?: (string | null)[];
}): Promise<number[]>;
/**
 * Submits a workflow (all its steps in one statement); returns its id. With a `key` in the spec,
 * the active workflow holding that key is returned instead of starting a second one.
 */
export declare function submit(db: Queryable, spec: WorkflowSpec): Promise<string>;
/**
 * Signals an event: every job waiting for it becomes ready with the payload in its events, and
 * the signal is kept for jobs that await it later. Returns the number of jobs made ready.
 */
export declare function signal(db: Queryable, event: string, payload?: Json): Promise<number>;
/**
 * Signal-with-start: the active workflow holding `spec.key` (started from `spec` if there is
 * none) and the event signalled, in one transaction. Returns the workflow's id.
 */
export declare function signalWithStart(db: Queryable, spec: WorkflowSpec, event: string, payload?: Json): Promise<string>;
/**
 * Blocks until the job has finished (woken by the commit that ends it, no polling), up to
 * `timeout` (default 30 s); returns its status, result and error, or on a timeout the status it has
 * then. Call it after the enqueue committed, on a connection that is not in that transaction.
 */
export declare function waitJob<R = Json>(db: Queryable, queue: string, id: number, options?: {
    timeout?: Duration;
}): Promise<Outcome<R>>;
/** `waitJob` for a workflow: `result` holds its final steps' results by step name. */
export declare function waitWorkflow<R = Record<string, Json>>(db: Queryable, workflowId: string, options?: {
    timeout?: Duration;
}): Promise<Outcome<R>>;
/** `wf_workflow`: the workflow's status, counts and every step (name, status, attempts, result, ...). */
export declare function workflow(db: Queryable, workflowId: string): Promise<Record<string, any>>;
/** Cancels a job (a running one is flagged: its heartbeat turns false). */
export declare function cancel(db: Queryable, queue: string, id: number): Promise<boolean>;
/** Runs a failed or cancelled job again with a fresh budget of attempts. */
export declare function retry(db: Queryable, queue: string, id: number): Promise<boolean>;
export interface WhereOptions {
    /** only these jobs */
    ids?: number[];
    /** only jobs whose last error contains this text (case-insensitive) */
    errorContains?: string;
    /** at most this many (default 1000) */
    maxJobs?: number;
}
/** `wf_retry_where`: retries the failed or cancelled jobs of `queue` that match; returns how many. */
export declare function retryWhere(db: Queryable, queue: string, where?: WhereOptions): Promise<number>;
/**
 * `wf_cancel_where`: cancels the matching jobs of `queue` (blocked, pending, waiting, failed; running
 * ones are flagged), narrowed to `statuses` if given; returns how many.
 */
export declare function cancelWhere(db: Queryable, queue: string, where?: WhereOptions & {
    statuses?: string[];
}): Promise<number>;
/** Cancels every unfinished step of a workflow; returns how many. */
export declare function cancelWorkflow(db: Queryable, workflowId: string): Promise<number>;
export interface QueueSettings {
    maxAttempts?: number;
    backoffBase?: Duration;
    backoffMax?: Duration;
    /** heartbeat deadline of a claim; `0` removes it */
    lease?: Duration;
    /** the most jobs of the queue running at once; `0` removes the limit */
    maxRunning?: number;
    paused?: boolean;
    rateLimit?: number;
    ratePeriod?: Duration;
    keyRateLimit?: number;
    keyConcurrency?: number;
    fair?: boolean;
    ordered?: boolean;
    maxRunTime?: Duration;
    /** the version of the queue's new jobs that name none (`''` removes it) */
    version?: string;
}
/** `wf_configure_queue`: settings left out keep their current value. */
export declare function configureQueue(db: Queryable, queue: string, settings: QueueSettings): Promise<void>;
/** Creates or replaces a cron schedule (UTC); returns its next run. */
export declare function schedule(db: Queryable, name: string, cron: string, queue: string, payload?: Json): Promise<Date>;
/** `wf_enable_schedule`: stops or restarts a schedule; false if there is none. */
export declare function enableSchedule(db: Queryable, name: string, enabled: boolean): Promise<boolean>;
/** Removes a schedule; false if there was none. */
export declare function unschedule(db: Queryable, name: string): Promise<boolean>;
