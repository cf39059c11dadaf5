/** Thrown by a handler: the job fails for good, no further attempts (`wf_fail(permanent => true)`). */
export class PermanentError extends Error {
    constructor(message, options) {
        super(message, options);
        this.name = 'PermanentError';
    }
}
/**
 * Thrown by a handler: this attempt fails and the job is retried after `retryIn` (ms, or an
 * interval as text) instead of the queue's backoff, e.g. an API's `Retry-After`
 * (`wf_fail(retry_in => ...)`). The attempt counts as usual.
 */
export class RetryAfter extends Error {
    retryIn;
    constructor(retryIn, message, options) {
        super(message ?? `retry after ${typeof retryIn === 'number' ? `${retryIn} ms` : retryIn}`, options);
        this.name = 'RetryAfter';
        this.retryIn = retryIn;
    }
}
/** `Job.awaitEvent` found that the event's timeout passed before a signal. */
export class EventTimeout extends Error {
    event;
    constructor(event) {
        super(`event "${event}" timed out`);
        this.name = 'EventTimeout';
        this.event = event;
    }
}
/** `Job.awaitChildren` found that its timeout passed first; `outcomes` holds those that arrived. */
export class ChildrenTimeout extends Error {
    outcomes;
    constructor(outcomes) {
        super('child workflows did not finish before the timeout');
        this.name = 'ChildrenTimeout';
        this.outcomes = outcomes;
    }
}
/**
 * Ends a handler's run: the job parked itself or is no longer this worker's. Not a failure: the
 * worker catches it and logs what happened. A handler that catches errors should rethrow these
 * (`if (err instanceof JobInterrupt) throw err`).
 */
export class JobInterrupt extends Error {
    constructor(message) {
        super(message);
        this.name = 'JobInterrupt';
    }
}
/**
 * The job parked itself (`sleep`, `awaitEvent`, `awaitChildren`): it is claimed again later, and
 * the handler runs again from the start with the job's checkpoints and events.
 */
export class Suspended extends JobInterrupt {
    /** what the parking call returned: `pending` or `waiting` */
    status;
    reason;
    constructor(status, reason) {
        super(`${reason}: ${status}`);
        this.name = 'Suspended';
        this.status = status;
        this.reason = reason;
    }
}
/**
 * The job's fencing token went stale: the job was cancelled, recovered after a lost session or
 * lease, taken back past its max_run_time, or given back at shutdown. Nothing this attempt writes
 * through pg_wf counts any more.
 */
export class JobLost extends JobInterrupt {
    reason;
    constructor(reason) {
        super(reason);
        this.name = 'JobLost';
        this.reason = reason;
    }
}
const MAX_FRAMES = 8;
const MAX_CHARS = 4000;
/**
 * What `wf_fail` records for a thrown value: `Name: message`, then the first frames of its stack
 * (node's internals left out), then its causes, at most 4,000 characters in all.
 */
export function formatError(error, maxFrames = MAX_FRAMES, maxChars = MAX_CHARS) {
    const parts = [];
    let current = error;
    for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
        const prefix = depth > 0 ? 'Caused by: ' : '';
        if (current instanceof Error) {
            const head = current.message ? `${current.name}: ${current.message}` : current.name;
            const frames = (current.stack ?? '')
                .split('\n')
                .filter((line) => /^\s+at /.test(line) && !line.includes('node:internal'))
                .map((line) => line.trimEnd());
            const shown = frames.slice(0, maxFrames);
            const trimmed = frames.length - shown.length;
            const note = trimmed > 0 && maxFrames > 0 ? [`    … ${trimmed} more frames`] : [];
            parts.push(prefix + [head, ...shown, ...note].join('\n'));
            current = current.cause;
        }
        else {
            parts.push(prefix + (typeof current === 'string' ? current : safeString(current)));
            current = undefined;
        }
    }
    const text = parts.join('\n');
    return text.length <= maxChars ? text : `${text.slice(0, maxChars - 1)}…`;
}
function safeString(v) {
    try {
        const s = JSON.stringify(v);
        return s === undefined ? String(v) : s;
    }
    catch {
        return String(v);
    }
}
