// Errors a handler throws, and the ones the library uses to unwind a handler.
import type { Duration } from './types.js';

/** Thrown by a handler: the job fails at once, without further retries (`wf_fail(permanent => true)`). */
export class PermanentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PermanentError';
  }
}

/**
 * Thrown by a handler: the attempt fails and the job is retried after `retryIn` instead of the
 * queue's backoff (an API's `Retry-After`). The attempt counts.
 */
export class RetryError extends Error {
  readonly retryIn: Duration;
  constructor(message: string, options: { retryIn: Duration; cause?: unknown }) {
    super(message, options);
    this.name = 'RetryError';
    this.retryIn = options.retryIn;
  }
}

/**
 * The job is no longer this attempt's: its fencing token went stale (recovered after a lost
 * session or lease, cancelled, past its max_run_time, given back at shutdown). Thrown out of a
 * job context call that needs the token (`checkpoint`, `completeWith`, ...) to stop the handler;
 * the worker logs it and writes nothing more for the job. A handler has no need to catch it.
 */
export class JobLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JobLostError';
  }
}

/**
 * The job was parked (`sleep`, `awaitEvent`, `awaitChildren`) or cancelled while parking: it is
 * no longer running, and its handler runs again from the start at its next claim (with its
 * checkpoints, events and children's outcomes). Thrown to unwind the handler; the worker expects
 * it. A handler that catches errors must rethrow this one.
 */
export class JobSuspended extends Error {
  /** the status wf_snooze / wf_await_event / wf_await_children returned */
  readonly status: string;
  constructor(message: string, status: string) {
    super(message);
    this.name = 'JobSuspended';
    this.status = status;
  }
}

const MAX_FRAMES = 12;
const MAX_ERROR_CHARS = 8000;

/**
 * The text stored in `last_error` for a thrown value: the message, then the stack trimmed to the
 * first frames outside node's internals, then the causes.
 */
export function formatError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
    if (depth > 0) parts.push('caused by: ');
    if (current instanceof Error) {
      const head = `${current.name}: ${current.message}`;
      const frames = (current.stack ?? '')
        .split('\n')
        .filter((line) => /^\s+at /.test(line))
        .filter((line) => !line.includes('node:internal'))
        .slice(0, MAX_FRAMES)
        .map((line) => line.trimEnd());
      parts.push([head, ...frames].join('\n'));
      current = (current as { cause?: unknown }).cause;
    } else {
      parts.push(typeof current === 'string' ? current : safeString(current));
      current = undefined;
    }
    parts.push('\n');
  }
  const text = parts.join('').trimEnd();
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}\n…(truncated)` : text;
}

function safeString(v: unknown): string {
  try {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s;
  } catch {
    return String(v);
  }
}
