import type { Duration } from './types.js';
/** Thrown by a handler: the job fails at once, without further retries (`wf_fail(permanent => true)`). */
export declare class PermanentError extends Error {
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/**
 * Thrown by a handler: the attempt fails and the job is retried after `retryIn` instead of the
 * queue's backoff (an API's `Retry-After`). The attempt counts.
 */
export declare class RetryError extends Error {
    readonly retryIn: Duration;
    constructor(message: string, options: {
        retryIn: Duration;
        cause?: unknown;
    });
}
/**
 * The job is no longer this attempt's: its fencing token went stale (recovered after a lost
 * session or lease, cancelled, past its max_run_time, given back at shutdown). Thrown out of a
 * job context call that needs the token (`checkpoint`, `completeWith`, ...) to stop the handler;
 * the worker logs it and writes nothing more for the job. A handler has no need to catch it.
 */
export declare class JobLostError extends Error {
    constructor(message: string);
}
/**
 * The job was parked (`sleep`, `awaitEvent`, `awaitChildren`) or cancelled while parking: it is
 * no longer running, and its handler runs again from the start at its next claim (with its
 * checkpoints, events and children's outcomes). Thrown to unwind the handler; the worker expects
 * it. A handler that catches errors must rethrow this one.
 */
export declare class JobSuspended extends Error {
    /** the status wf_snooze / wf_await_event / wf_await_children returned */
    readonly status: string;
    constructor(message: string, status: string);
}
/**
 * The text stored in `last_error` for a thrown value: the message, then the stack trimmed to the
 * first frames outside node's internals, then the causes.
 */
export declare function formatError(err: unknown): string;
