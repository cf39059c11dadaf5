import type { ChildOutcome, Duration } from './types.js';
/** Thrown by a handler: the job fails for good, no further attempts (`wf_fail(permanent => true)`). */
export declare class PermanentError extends Error {
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/**
 * Thrown by a handler: this attempt fails and the job is retried after `retryIn` (ms, or an
 * interval as text) instead of the queue's backoff, e.g. an API's `Retry-After`
 * (`wf_fail(retry_in => ...)`). The attempt counts as usual.
 */
export declare class RetryAfter extends Error {
    readonly retryIn: Duration;
    constructor(retryIn: Duration, message?: string, options?: {
        cause?: unknown;
    });
}
/** `Job.awaitEvent` found that the event's timeout passed before a signal. */
export declare class EventTimeout extends Error {
    readonly event: string;
    constructor(event: string);
}
/** `Job.awaitChildren` found that its timeout passed first; `outcomes` holds those that arrived. */
export declare class ChildrenTimeout extends Error {
    readonly outcomes: Record<string, ChildOutcome>;
    constructor(outcomes: Record<string, ChildOutcome>);
}
/**
 * Ends a handler's run: the job parked itself or is no longer this worker's. Not a failure: the
 * worker catches it and logs what happened. A handler that catches errors should rethrow these
 * (`if (err instanceof JobInterrupt) throw err`).
 */
export declare class JobInterrupt extends Error {
    constructor(message: string);
}
/**
 * The job parked itself (`sleep`, `awaitEvent`, `awaitChildren`): it is claimed again later, and
 * the handler runs again from the start with the job's checkpoints and events.
 */
export declare class Suspended extends JobInterrupt {
    /** what the parking call returned: `pending` or `waiting` */
    readonly status: string;
    readonly reason: string;
    constructor(status: string, reason: string);
}
/**
 * The job's fencing token went stale: the job was cancelled, recovered after a lost session or
 * lease, taken back past its max_run_time, or given back at shutdown. Nothing this attempt writes
 * through pg_wf counts any more.
 */
export declare class JobLost extends JobInterrupt {
    readonly reason: string;
    constructor(reason: string);
}
/**
 * What `wf_fail` records for a thrown value: `Name: message`, then the first frames of its stack
 * (node's internals left out), then its causes, at most 4,000 characters in all.
 */
export declare function formatError(error: unknown, maxFrames?: number, maxChars?: number): string;
