// The job context a handler gets: the claimed job, and each pg_wf call a running job makes,
// fenced by its token (queue, id, attempt).
import type pg from 'pg';

import { JobLostError, JobSuspended } from './errors.js';
import type { Logger } from './logger.js';
import { call, interval, json } from './sql.js';
import type { ChildOutcome, Duration, EventRecord, Json, Queryable, StepSpec, WorkflowSpec } from './types.js';

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

const CHILD_EVENT = 'wf:child:';
const CHILDREN_EVENT = 'wf:children';
const SLEEP_CHECKPOINT = 'pg_wf:sleep:';

/**
 * One claimed attempt of a job, given to its handler. Everything a running job asks of pg_wf goes
 * through it; each call is fenced by the attempt's token, so a handler whose job was taken away
 * (recovered, cancelled, given back) changes nothing: the call throws `JobLostError` (or returns
 * false, for `heartbeat` and `progress`), the handler stops, and the worker logs it.
 */
export class Job<P = Json, R = Json> {
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

  /** @internal */ state: JobState = 'running';
  /** @internal */ readonly children = new Map<string, string>();
  private readonly abort = new AbortController();
  private readonly host: JobHost;

  /** @internal */
  constructor(row: ClaimRow, db: pg.Client, host: JobHost) {
    this.queue = row.queue;
    this.id = Number(row.id);
    this.attempt = row.attempt;
    this.payload = row.payload as P;
    this.inputs = row.inputs ?? {};
    this.checkpoints = { ...(row.checkpoints ?? {}) };
    this.events = row.events ?? {};
    this.workflowId = row.workflow_id;
    this.stepName = row.step_name;
    this.priority = row.priority;
    this.maxAttempts = row.max_attempts;
    this.leaseExpiresAt = row.lease_expires_at;
    this.idempotencyKey = row.idempotency_key ?? `${host.idempotencyKeyPrefix}:${row.queue}:${this.id}`;
    this.db = db;
    this.host = host;
    this.signal = this.abort.signal;
  }

  /** `queue/id#attempt`, for log lines. */
  toString(): string {
    return `${this.queue}/${this.id}#${this.attempt}`;
  }

  private token(): [unknown, string][] {
    return [[this.queue, 'text'], [this.id, 'bigint'], [this.attempt, 'int']];
  }

  private async value<T>(db: Queryable, fn: string, more: [unknown, string][] = [], named = {}): Promise<T> {
    const q = call(fn, [...this.token(), ...more], named);
    const res = await db.query(`SELECT ${q.text} AS v`, q.values);
    return res.rows[0].v as T;
  }

  /** @internal Marks the job as not this attempt's any more and aborts `signal`. */
  markLost(reason: string, state: JobState = 'lost'): void {
    if (this.state === 'running') this.state = state;
    if (!this.abort.signal.aborted) this.abort.abort(new JobLostError(`job ${this}: ${reason}`));
  }

  private lost(what: string): never {
    this.markLost(`${what}: the job is not this attempt's any more (recovered, cancelled or timed out)`);
    throw this.signal.reason as JobLostError;
  }

  private suspend(what: string, status: string): never {
    this.state = 'suspended';
    throw new JobSuspended(`job ${this} ${what} (${status}): it runs again at its next claim`, status);
  }

  private checkRunning(what: string): void {
    if (this.state === 'completed') throw new Error(`pg_wf: job ${this} is already completed; ${what} is too late`);
    if (this.state === 'suspended') throw new JobSuspended(`job ${this} is suspended; ${what} is too late`, 'suspended');
    if (this.state !== 'running') throw (this.signal.reason as Error) ?? new JobLostError(`job ${this} is lost`);
  }

  /**
   * Runs `fn` once across attempts: its output is recorded with `wf_checkpoint` under `name`, and
   * a later attempt (after a crash, a retry, a sleep) gets the recorded output back without
   * running `fn`. The output must be JSON (undefined is stored as null). Names are per job.
   */
  async checkpoint<T extends Json>(name: string, fn: () => T | Promise<T>): Promise<T> {
    if (Object.prototype.hasOwnProperty.call(this.checkpoints, name)) return this.checkpoints[name] as T;
    this.checkRunning(`checkpoint("${name}")`);
    const output = ((await fn()) ?? null) as T;
    const status = await this.value<string | null>(this.db, 'wf_checkpoint', [[name, 'text'], [json(output), 'jsonb']]);
    if (status === null) this.lost(`checkpoint("${name}")`);
    this.checkpoints[name] = output;
    return output;
  }

  /**
   * A durable sleep: the job goes back to pending until `duration` has passed (`wf_snooze`),
   * holding no session or lease, its attempt not spent, and the handler stops here (this throws
   * `JobSuspended`). At the next claim the handler runs again from the start; its checkpoints
   * return their outputs, and this call, with the same name, returns at once once the time has
   * come. `name` makes the sleep one point of the job (like a checkpoint's name).
   */
  async sleep(name: string, duration: Duration): Promise<void> {
    const key = SLEEP_CHECKPOINT + name;
    let until = (this.checkpoints[key] as { until?: string } | undefined)?.until;
    this.checkRunning(`sleep("${name}")`);
    if (until === undefined) {
      // The wake time is the server's, recorded as the checkpoint's output.
      const res = await this.db.query(
        `SELECT wf_checkpoint($1::text, $2::bigint, $3::int, $4::text,
                              jsonb_build_object('until', t.until)) AS status, t.until
           FROM (SELECT clock_timestamp() + $5::interval AS until) t`,
        [this.queue, this.id, this.attempt, key, interval(duration)],
      );
      if (res.rows[0].status === null) this.lost(`sleep("${name}")`);
      until = (res.rows[0].until as Date).toISOString();
      this.checkpoints[key] = { until };
    }
    const res = await this.db.query(
      `SELECT CASE WHEN $4::timestamptz > clock_timestamp()
                   THEN wf_snooze($1::text, $2::bigint, $3::int, $4::timestamptz - clock_timestamp())
                   ELSE 'elapsed' END AS status`,
      [this.queue, this.id, this.attempt, until],
    );
    const status = res.rows[0].status as string | null;
    if (status === 'elapsed') return;
    if (status === null) this.lost(`sleep("${name}")`);
    this.suspend(`sleeps until ${until}`, status);
  }

  /**
   * Waits for an event (`wf_await_event`). If the event was delivered already (a signal, kept by
   * the server, or this job's timeout), returns it; otherwise the job parks as `waiting`, holding
   * nothing, and the handler stops here (this throws `JobSuspended`); the signal (or the timeout)
   * makes the job ready again, and the handler's next run gets the event from this call.
   * Event names are per job: awaiting one name twice returns the first delivery.
   */
  async awaitEvent<T extends Json = Json>(
    event: string,
    options: { timeout?: Duration } = {},
  ): Promise<{ status: 'signalled'; payload: T } | { status: 'timed_out' }> {
    const delivered = this.events[event] as EventRecord | undefined;
    if (delivered) return delivered as { status: 'signalled'; payload: T } | { status: 'timed_out' };
    this.checkRunning(`awaitEvent("${event}")`);
    const status = await this.value<string | null>(this.db, 'wf_await_event', [[event, 'text']], {
      timeout: [interval(options.timeout), 'interval'],
    });
    if (status === null) this.lost(`awaitEvent("${event}")`);
    this.suspend(`awaits event "${event}"`, status);
  }

  /**
   * Starts a child workflow named `name` (`wf_start_child`; a single job is a one-step spec).
   * The same name again, in any attempt, returns the same child: call it again on every run.
   * Returns the child workflow's id.
   */
  async startChild(name: string, spec: WorkflowSpec): Promise<string> {
    this.checkRunning(`startChild("${name}")`);
    const id = await this.value<string | null>(this.db, 'wf_start_child', [[name, 'text'], [json(spec as Json), 'jsonb']]);
    if (id === null) this.lost(`startChild("${name}")`);
    this.children.set(name, id);
    return id;
  }

  /**
   * Waits until every child started in this run (by `startChild`) has finished, and returns their
   * outcomes by name. Until then the job parks (`wf_await_children`: waiting, its attempt not
   * spent) and the handler stops here (this throws `JobSuspended`); the last child's end makes it
   * ready, and the next run, starting the same children again, gets their outcomes from this
   * call. A child that failed does not fail the parent: look at each outcome's `status`. After
   * `timeout`, the children still running come back with status `running`.
   */
  async awaitChildren(options: { timeout?: Duration } = {}): Promise<Record<string, ChildOutcome>> {
    const outcomes: Record<string, ChildOutcome> = {};
    let missing = 0;
    for (const [name, workflowId] of this.children) {
      const o = this.events[CHILD_EVENT + name] as ChildOutcome | undefined;
      if (o) outcomes[name] = o;
      else {
        missing++;
        outcomes[name] = { workflow_id: workflowId, status: 'running', results: null, error: null };
      }
    }
    if (missing === 0 || this.events[CHILDREN_EVENT]?.status === 'timed_out') return outcomes;
    this.checkRunning('awaitChildren()');
    const status = await this.value<string | null>(this.db, 'wf_await_children', [], {
      timeout: [interval(options.timeout), 'interval'],
    });
    if (status === null) this.lost('awaitChildren()');
    this.suspend(`awaits ${missing} child workflow(s)`, status);
  }

  /**
   * Tells the server this attempt is alive (`wf_heartbeat`, extending a lease). The worker does
   * it by itself well inside the lease; call it only to learn at once whether to go on. False: the
   * job is not this attempt's any more (cancelled, past its max_run_time, recovered) and `signal`
   * is aborted: stop.
   */
  async heartbeat(): Promise<boolean> {
    if (this.state !== 'running') return false;
    const ok = await this.value<boolean>(this.host.control, 'wf_heartbeat');
    if (!ok) this.markLost('heartbeat refused: the job was cancelled, ran past its max_run_time or was recovered');
    return ok;
  }

  /**
   * Reports progress (`wf_progress`, up to 8 kB of JSON), shown in `wf.jobs.progress` and in
   * `wf_workflow`. False (and `signal` aborted) if the job is not this attempt's any more.
   */
  async progress(value: Json): Promise<boolean> {
    if (this.state !== 'running') return false;
    const ok = await this.value<boolean>(this.host.control, 'wf_progress', [[json(value), 'jsonb']]);
    if (!ok) this.markLost('progress refused: the job is not this attempt\'s any more');
    return ok;
  }

  /**
   * Exactly-once effects: runs `fn` in a transaction on the job's own connection (`tx` is
   * `job.db`), then completes the job with `fn`'s result in the same transaction, and commits. If
   * the job is no longer this attempt's, the completion is refused, the transaction (with the
   * effect) is rolled back and this throws `JobLostError`; so the effect commits if and only if
   * the job completes. With `steps`, the completion also adds those steps to the job's workflow
   * (`wf_complete_with_steps`). The handler's own return value is then not used.
   */
  async completeWith<T extends R>(
    fn: (tx: pg.Client) => T | Promise<T>,
    options: { steps?: StepSpec[] } = {},
  ): Promise<T> {
    this.checkRunning('completeWith()');
    await this.db.query('BEGIN');
    let committed = false;
    try {
      const result = await fn(this.db);
      const ok = await this.finishCall(this.db, (result ?? null) as Json, options.steps);
      if (!ok) {
        await this.db.query('ROLLBACK');
        committed = true;
        this.lost('completeWith() (the transaction was rolled back)');
      }
      await this.db.query('COMMIT');
      committed = true;
      this.state = 'completed';
      return result;
    } finally {
      if (!committed) await this.db.query('ROLLBACK').catch(() => undefined);
    }
  }

  /**
   * Fan-out at run time: completes this workflow step with `result` and adds `steps` to its
   * workflow in one statement (`wf_complete_with_steps`). A step's `after` may name the new steps
   * and done steps (this one counts as done); `queue` defaults to this step's.
   */
  async completeWithSteps(result: R, steps: StepSpec[]): Promise<void> {
    this.checkRunning('completeWithSteps()');
    const ok = await this.finishCall(this.db, (result ?? null) as Json, steps);
    if (!ok) this.lost('completeWithSteps()');
    this.state = 'completed';
  }

  private finishCall(db: Queryable, result: Json, steps: StepSpec[] | undefined): Promise<boolean> {
    return steps === undefined
      ? this.value<boolean>(db, 'wf_complete', [[json(result), 'jsonb']])
      : this.value<boolean>(db, 'wf_complete_with_steps', [[json(result), 'jsonb'], [json(steps as Json), 'jsonb']]);
  }

  /** @internal The worker's completion with the handler's return value. */
  async complete(result: Json): Promise<boolean> {
    const ok = await this.finishCall(this.db, result, undefined);
    if (ok) this.state = 'completed';
    else this.markLost('completion refused');
    return ok;
  }

  /** @internal The worker's `wf_fail`; returns the new status, or null for a stale token. */
  async fail(
    db: Queryable,
    error: string,
    options: { retryIn?: Duration; permanent?: boolean } = {},
  ): Promise<string | null> {
    return this.value<string | null>(db, 'wf_fail', [[error, 'text']], {
      retry_in: [interval(options.retryIn), 'interval'],
      permanent: [options.permanent, 'boolean'],
    });
  }
}
