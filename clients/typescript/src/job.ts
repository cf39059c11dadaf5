// The job context a handler gets: what the claim returned, and the calls a running job makes
// with its fencing token (queue, id, attempt).
//
// A handler may run more than once for one job: after a crash, a retry, or a park (sleep,
// awaitEvent, awaitChildren), the job is claimed again and the handler starts over from the top,
// with the job's checkpoints and events. Code before a park therefore runs again; wrap what must
// run once in `checkpoint`.
import type pg from 'pg';

import { ChildrenTimeout, EventTimeout, JobLost, Suspended } from './errors.js';
import type { Logger } from './logger.js';
import { call, interval, json, type Arg } from './sql.js';
import type { ChildOutcome, Duration, Json, Queryable, StepSpec, WorkflowSpec } from './types.js';

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

/** What the worker lends a job. @internal */
export interface JobHost {
  keyPrefix: string;
  logger: Logger;
  /** the transaction status of the job's connection: I (idle), T (in a transaction), E (failed) */
  txStatus(): string;
  /** runs fn on the worker's control connection (heartbeats, progress) */
  control<T>(fn: (db: Queryable) => Promise<T>): Promise<T>;
}

/**
 * How far the job's attempt got, as the worker reads it after the handler: undefined while it
 * runs; then completed, stale (a fenced call was refused), refused (a completion refused and
 * rolled back: a job whose cancel was requested still holds its token), parked, cancelled,
 * failed, given_back.
 * @internal
 */
export type Finished =
  | undefined
  | 'completing'
  | 'completed'
  | 'stale'
  | 'refused'
  | 'parking'
  | 'parked'
  | 'cancelled'
  | 'failed'
  | 'given_back';

export const CHILD_EVENT = 'wf:child:';
export const SLEEP_CHECKPOINT = 'pg_wf.sleep:';

/** A stale completion inside `transaction()`: rolls its block back. */
class Rollback extends Error {}

/**
 * One claimed job, given to its handler. Every call it makes for the job is fenced by the
 * attempt's token: once the job is no longer this attempt's (recovered, cancelled, timed out,
 * given back), a call that needs the token throws `JobLost` and the handler stops; the worker
 * logs it and writes nothing more.
 */
export class Job<P = any, R = any> {
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

  /** @internal */ finished: Finished = undefined;
  /** @internal */ lostReason = '';
  private readonly enqueueKey: string | null;
  private readonly host: JobHost;
  private readonly abort = new AbortController();
  private readonly steps: StepSpec[] = [];
  private readonly children: string[] = [];
  private sleeps = 0;
  private inTransaction = false;

  /** @internal */
  constructor(row: ClaimRow, client: pg.Client, workerName: string, host: JobHost) {
    this.queue = row.queue;
    this.id = Number(row.id);
    this.attempt = row.attempt;
    this.payload = row.payload as P;
    this.inputs = row.inputs ?? {};
    this.workflowId = row.workflow_id;
    this.step = row.step_name;
    this.priority = row.priority;
    this.maxAttempts = row.max_attempts;
    this.leaseExpiresAt = row.lease_expires_at;
    this.checkpoints = { ...(row.checkpoints ?? {}) };
    this.events = { ...(row.events ?? {}) };
    this.enqueueKey = row.idempotency_key;
    this.client = client;
    this.workerName = workerName;
    this.host = host;
    this.signal = this.abort.signal;
  }

  toString(): string {
    return `job ${this.queue}/${this.id} (${this.step ? `${this.step}, ` : ''}attempt ${this.attempt})`;
  }

  /** The fencing token (queue, id, attempt) of this claim. */
  get token(): [queue: string, id: number, attempt: number] {
    return [this.queue, this.id, this.attempt];
  }

  /**
   * A key for outside APIs (an `Idempotency-Key` header): the enqueue's idempotency key, else
   * `<prefix>:<queue>:<id>` (prefix `pg_wf` unless the worker's `keyPrefix` says otherwise). The
   * same for every attempt and recovery of this job, never per attempt: a retry after a crash that
   * came after the outside call must present the same key, or the outside API does it twice.
   */
  get idempotencyKey(): string {
    return this.enqueueKey ?? `${this.host.keyPrefix}:${this.queue}:${this.id}`;
  }

  /**
   * True once a heartbeat (or another call) found the job no longer this attempt's: cancelled,
   * recovered, past its max_run_time, or given back at shutdown. Stop working on it.
   */
  get lost(): boolean {
    return this.signal.aborted;
  }

  // ------------------------------------------------------------------ in the handler

  /**
   * Runs `fn` once across attempts: its value (JSON; undefined is stored as null) is recorded
   * with `wf_checkpoint`, and a later run (after a crash, a retry, a park) gets it back from its
   * claim without running `fn` again. Inside `transaction()` the record commits with the block.
   */
  async checkpoint<T extends Json>(name: string, fn: () => T | Promise<T>): Promise<T> {
    if (Object.prototype.hasOwnProperty.call(this.checkpoints, name)) {
      this.host.logger.debug(`pg_wf: ${this}: checkpoint "${name}" restored`);
      return this.checkpoints[name] as T;
    }
    this.check();
    const value = ((await fn()) ?? null) as T;
    const status = await this.call<string | null>(this.client, 'wf_checkpoint', [name, 'text'], [json(value), 'jsonb']);
    if (status === null) {
      this.finished = 'stale';
      this.throwLost('wf_checkpoint found the token stale');
    }
    this.checkpoints[name] = value;
    return value;
  }

  /**
   * A durable sleep: parks the job (`wf_snooze`: pending, no worker, no attempt spent) and ends
   * this run (throws `Suspended`); the handler runs again after `delay` (ms, or an interval as
   * text), and this call then returns at once. The sleep is a checkpoint (`pg_wf.sleep:<name>`);
   * unnamed sleeps are numbered in call order, so a handler must make them in the same order on
   * every run.
   */
  async sleep(delay: Duration, name?: string): Promise<void> {
    this.sleeps++;
    const checkpoint = SLEEP_CHECKPOINT + (name ?? String(this.sleeps));
    this.notInTransaction('sleep');
    let status: string | null;
    if (Object.prototype.hasOwnProperty.call(this.checkpoints, checkpoint)) {
      const until = (this.checkpoints[checkpoint] as { until?: string } | null)?.until;
      if (!until) return;
      status = await this.parking(async () => {
        const res = await this.client.query(
          `SELECT CASE WHEN $4::timestamptz > clock_timestamp()
                       THEN wf_snooze($1::text, $2::bigint, $3::int, $4::timestamptz - clock_timestamp())
                       ELSE 'elapsed' END AS status`,
          [...this.token, until],
        );
        return res.rows[0].status as string | null;
      });
      if (status === 'elapsed') {
        this.finished = undefined;
        return;
      }
    } else {
      status = await this.parking(async () => {
        // the wake time (the server's clock) and the snooze commit together
        await this.client.query('BEGIN');
        try {
          const res = await this.client.query(
            `SELECT CASE WHEN wf_checkpoint($1::text, $2::bigint, $3::int, $4::text,
                                            jsonb_build_object('until', clock_timestamp() + $5::interval)) IS NULL
                         THEN NULL
                         ELSE wf_snooze($1::text, $2::bigint, $3::int, $5::interval) END AS status`,
            [...this.token, checkpoint, interval(delay)],
          );
          await this.client.query('COMMIT');
          return res.rows[0].status as string | null;
        } catch (err) {
          await this.client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      });
    }
    this.park(status, typeof delay === 'number' ? `sleep ${delay} ms` : `sleep ${delay}`);
  }

  /**
   * The payload of `event` once it was signalled (`wf_signal`). Until then, parks the job
   * (`wf_await_event`: waiting, no worker, no attempt spent) and ends this run (throws
   * `Suspended`); the handler runs again when the signal arrives (at once if it was signalled
   * before: signals are kept), and this call then returns the payload. After the timeout it
   * throws `EventTimeout`. Event names are per job: awaiting one twice returns the first delivery.
   */
  async awaitEvent<T extends Json = Json>(event: string, options: { timeout?: Duration } = {}): Promise<T> {
    const delivered = this.events[event] as { status?: string; payload?: Json } | undefined;
    if (delivered) {
      if (delivered.status === 'signalled') return (delivered.payload ?? null) as T;
      throw new EventTimeout(event);
    }
    this.notInTransaction('awaitEvent');
    const status = await this.parking(() =>
      this.call<string | null>(this.client, 'wf_await_event', [event, 'text'], {
        timeout: [interval(options.timeout), 'interval'],
      }),
    );
    this.park(status, `awaitEvent "${event}"`);
  }

  /**
   * Starts the child workflow `name` (`wf_start_child`; `spec` is what `submit` takes, a single
   * job is a one-step spec) and returns its id. The same name again, in this run or a later one,
   * returns the same child: start them on every run, before `awaitChildren`.
   */
  async startChild(name: string, spec: WorkflowSpec): Promise<string> {
    this.check();
    const child = await this.call<string | null>(this.client, 'wf_start_child', [name, 'text'], [json(spec as Json), 'jsonb']);
    if (child === null) this.throwLost('wf_start_child: the token is stale or a cancel was requested');
    if (!this.children.includes(name)) this.children.push(name);
    return child;
  }

  /**
   * The outcomes of the children started with `startChild`, by name, once all have finished.
   * Until then parks the job (`wf_await_children`) and ends this run (throws `Suspended`); the
   * handler runs again with the outcomes in its events. A child that failed is an outcome with
   * status `failed`, not an error. After the timeout: `ChildrenTimeout` (with the outcomes that
   * arrived).
   */
  async awaitChildren(options: { timeout?: Duration } = {}): Promise<Record<string, ChildOutcome>> {
    const outcomes = this.childOutcomes();
    if (this.children.every((name) => name in outcomes)) return outcomes;
    if (this.events['wf:children']?.status === 'timed_out') throw new ChildrenTimeout(outcomes);
    this.notInTransaction('awaitChildren');
    const status = await this.parking(() =>
      this.call<string | null>(this.client, 'wf_await_children', {
        timeout: [interval(options.timeout), 'interval'],
      }),
    );
    this.park(status, `awaitChildren (${this.children.length})`);
  }

  /** The child outcomes delivered so far (from the claim's events), by child name. */
  childOutcomes(): Record<string, ChildOutcome> {
    const out: Record<string, ChildOutcome> = {};
    for (const [key, o] of Object.entries(this.events)) {
      if (!key.startsWith(CHILD_EVENT) || !o) continue;
      out[key.slice(CHILD_EVENT.length)] = {
        status: o.status,
        results: o.results ?? {},
        error: o.error ?? null,
        workflowId: o.workflow_id ?? null,
        ok: o.status === 'done',
      };
    }
    return out;
  }

  /**
   * Fan-out at run time: steps (`submit`'s step objects) added to this job's workflow when it
   * completes, in the same statement (`wf_complete_with_steps`). Their `after` may name this step,
   * other new steps and done steps; `queue` defaults to this step's.
   */
  addSteps(steps: StepSpec[]): void {
    this.steps.push(...steps);
  }

  /**
   * Tells pg_wf the job is alive and extends its lease (`wf_heartbeat`). The worker does this by
   * itself, well inside the lease; call it only to learn at once whether the job is still yours.
   * Throws `JobLost` if it is not.
   */
  async heartbeat(): Promise<void> {
    this.check();
    if (this.finished !== undefined) return;
    const ok = await this.host.control((db) => this.call<boolean>(db, 'wf_heartbeat'));
    if (!ok && this.finished === undefined) {
      this.markLost('a heartbeat found it cancelled, recovered or past its max_run_time');
      throw new JobLost(this.lostReason);
    }
  }

  /**
   * Reports progress (`wf_progress`: a small JSON value, up to 8 kB, shown in `wf.jobs.progress`
   * and `wf_workflow`; no WAL). Throws `JobLost` if the job is no longer yours.
   */
  async progress(report: Json): Promise<void> {
    this.check();
    const ok = await this.host.control((db) => this.call<boolean>(db, 'wf_progress', [json(report), 'jsonb']));
    if (!ok) {
      this.finished = 'stale';
      this.throwLost('wf_progress found the token stale');
    }
  }

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
  async transaction<T>(fn: (tx: pg.Client) => Promise<T>): Promise<T | undefined> {
    if (this.inTransaction) throw new Error('pg_wf: job.transaction() is already open');
    this.check();
    await this.client.query('BEGIN');
    this.inTransaction = true;
    let value: T;
    try {
      value = await fn(this.client);
    } catch (err) {
      this.inTransaction = false;
      await this.client.query('ROLLBACK').catch(() => undefined);
      if (err instanceof Rollback) return undefined;
      if (this.finished === 'completed') this.finished = undefined; // its completion rolled back
      throw err;
    }
    this.inTransaction = false;
    try {
      await this.client.query('COMMIT');
    } catch (err) {
      if (this.finished === 'completed') this.finished = undefined;
      throw err;
    }
    return value;
  }

  /**
   * Completes the job now (`wf_complete`, or `wf_complete_with_steps` with `steps`, or steps
   * given to `addSteps`); the handler's return value is then not used. True if it was still
   * yours. A stale token is logged and returns false; inside `transaction()` it rolls the block
   * back; in a transaction of the handler's own it throws `JobLost`, so that the transaction's
   * effects do not commit.
   */
  async complete(result?: R | Json, steps?: StepSpec[]): Promise<boolean> {
    if (this.finished !== undefined) throw new Error(`pg_wf: ${this} already ended (${this.finished})`);
    const all = [...this.steps, ...(steps ?? [])];
    this.finished = 'completing'; // the heartbeats stop here
    let ok: boolean;
    try {
      ok =
        all.length > 0
          ? await this.call<boolean>(this.client, 'wf_complete_with_steps', [json((result ?? null) as Json), 'jsonb'], [json(all as Json), 'jsonb'])
          : await this.call<boolean>(this.client, 'wf_complete', [json((result ?? null) as Json), 'jsonb']);
    } catch (err) {
      this.finished = undefined;
      throw err;
    }
    if (ok) {
      this.finished = 'completed';
      this.host.logger.debug(`pg_wf: ${this}: completed`);
      return true;
    }
    this.markLost('wf_complete refused a stale token');
    this.logStale('wf_complete');
    // Refused in a transaction that rolls back: a job whose cancel was requested is still running
    // (wf_complete would have ended it cancelled), so the worker ends its attempt after the handler.
    const rolledBack = this.inTransaction || this.host.txStatus() !== 'I';
    this.finished = rolledBack ? 'refused' : 'stale';
    if (this.inTransaction) throw new Rollback();
    if (rolledBack) throw new JobLost(this.lostReason);
    return false;
  }

  // ------------------------------------------------------------------ internals

  /** SELECT fn(queue, id, attempt, args..., named...) on `db`. @internal */
  async call<T>(db: Queryable, fn: string, ...args: (Arg | Record<string, Arg>)[]): Promise<T> {
    const positional: Arg[] = [[this.queue, 'text'], [this.id, 'bigint'], [this.attempt, 'int']];
    let named: Record<string, Arg> = {};
    for (const a of args) {
      if (Array.isArray(a)) positional.push(a);
      else named = a;
    }
    const q = call(fn, positional, named);
    const res = await db.query(`SELECT ${q.text} AS v`, q.values);
    return res.rows[0].v as T;
  }

  /** @internal */
  logStale(fn: string): void {
    this.host.logger.warn(`pg_wf: ${this}: ${fn} refused a stale token (the job was cancelled, recovered, or given back); nothing recorded`);
  }

  /** Marks the job lost and aborts `signal`. @internal */
  markLost(reason: string): void {
    if (!this.signal.aborted) {
      this.lostReason = reason;
      this.abort.abort(new JobLost(reason));
    }
  }

  private throwLost(reason: string): never {
    this.markLost(reason);
    throw new JobLost(this.lostReason);
  }

  private check(): void {
    if (this.signal.aborted) throw new JobLost(this.lostReason);
  }

  private notInTransaction(what: string): void {
    if (this.inTransaction || this.host.txStatus() !== 'I') {
      throw new Error(
        `pg_wf: job.${what}() parks the job and ends the handler's run: call it outside a transaction (its rollback would undo the park)`,
      );
    }
  }

  /** Runs a call that parks the job; the heartbeats stop meanwhile. */
  private async parking(park: () => Promise<string | null>): Promise<string | null> {
    this.check();
    this.finished = 'parking';
    try {
      return await park();
    } catch (err) {
      this.finished = undefined;
      throw err;
    }
  }

  private park(status: string | null, what: string): never {
    if (status === null) {
      this.finished = 'stale';
      this.throwLost(`${what}: the token is stale`);
    }
    if (status === 'cancelled') {
      this.finished = 'cancelled';
      this.throwLost(`${what}: the job was cancelled`);
    }
    this.finished = 'parked';
    throw new Suspended(status, what);
  }
}
