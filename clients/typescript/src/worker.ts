// The Worker: runs registered handlers on the jobs of their queues.
//
// Per queue, `concurrency` slots, each with its own connection: a claimed job belongs to the
// session that claimed it, so every job in flight has a session of its own, which is also the
// connection its handler gets (`job.client`). A slot claims one job at a time with
// `wf_claim(wait => ...)`, so an idle worker sleeps in the server until a commit makes a job ready
// (no polling). One more connection, the control connection, sends the heartbeats of every job in
// flight (a third of the lease, or `heartbeatEvery`), their progress reports, and the give-backs
// at shutdown.
//
// Shutdown (`stop()`, or SIGTERM/SIGINT under `run()`): the waiting claims are cancelled, so
// nothing new is claimed; jobs in flight get `shutdownTimeout` to finish; those still running then
// are given back with `wf_fail(retry_in => shutdownRetryIn)`, so that another worker takes them
// soon. A second signal gives them back without waiting.
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';

import pg from 'pg';

import { connectionConfig } from './dsn.js';
import { JobInterrupt, JobLost, PermanentError, RetryAfter, Suspended, formatError } from './errors.js';
import { Job, type ClaimRow, type JobHost } from './job.js';
import { defaultLogger, type Logger } from './logger.js';
import { interval } from './sql.js';
import type { Duration, Json, Queryable } from './types.js';

/** A handler: gets the job, returns its result (JSON), throws to fail the attempt. */
export type Handler<P = any, R = any> = (job: Job<P, R>) => R | void | Promise<R | void>;

export interface RegisterOptions {
  /** only the jobs of this workflow step (a queue's handler without `step` takes the others) */
  step?: string;
  /** jobs of the queue run at once by this worker, each on its own connection (default: the worker's, 1) */
  concurrency?: number;
}

export interface WorkerOptions {
  /**
   * A connection string (a URL, or libpq's `host=... dbname=...`) or a node-postgres client
   * config; default: the PG* environment variables.
   */
  connection?: string | pg.ClientConfig;
  /** this worker's name in `wf.jobs.worker` (default `<hostname>:<pid>`; slots add `/<queue>/<n>`) */
  name?: string;
  /** claim only jobs of these versions (default: any job) */
  versions?: string[];
  /** the claims' lease, a heartbeat deadline (default: the queue's, else `wf.default_lease`) */
  lease?: Duration;
  /** jobs in flight per queue when its registration does not say (default 1) */
  concurrency?: number;
  /** how long one waiting claim blocks in the server before it is made again (default 10 s) */
  claimWait?: Duration;
  /** the most time between two heartbeats of a job, in ms (default 10 s); with a lease, a third of it at most */
  heartbeatEvery?: number;
  /** how long in-flight jobs may take to finish after a stop, in ms (default 30 s) */
  shutdownTimeout?: number;
  /** the retry delay of a job given back at shutdown (default 1 s) */
  shutdownRetryIn?: Duration;
  /** the prefix of the idempotency keys derived from (queue, id) (default `pg_wf`) */
  keyPrefix?: string;
  /** stop gracefully on SIGTERM and SIGINT while `run()` runs (default true) */
  handleSignals?: boolean;
  /** where the worker logs; default: warnings and errors to the console (`PG_WF_LOG_LEVEL` sets the level) */
  logger?: Logger;
}

const CLAIM_SQL = `SELECT c.*, extract(epoch FROM c.lease_expires_at - clock_timestamp())::float8 AS lease_left
  FROM wf_claim($1::text, worker => $2::text, max_jobs => 1, lease => $3::interval,
                wait => $4::interval, versions => $5::text[]) c`;

interface Deferred<T = void> {
  promise: Promise<T>;
  resolve: (v: T) => void;
}
function deferred<T = void>(): Deferred<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A connection of the worker's own: made on first use, again after it broke. */
class Connection implements Queryable {
  client: pg.Client | undefined;
  pid: number | undefined;
  /** the transaction status of the last ReadyForQuery: I (idle), T (in a transaction), E (failed one) */
  txStatus = 'I';
  /** set while the worker itself ends the session: its error is expected */
  ending = false;
  private connecting: Promise<pg.Client> | undefined;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly logger: Logger,
    readonly label: string,
    /** run once on each new session */
    private readonly setup?: string,
  ) {}

  async get(): Promise<pg.Client> {
    if (this.client) return this.client;
    if (!this.connecting) {
      this.connecting = (async () => {
        const client = new pg.Client(this.config);
        client.on('error', (err) => {
          if (this.ending) this.logger.debug(`pg_wf: ${this.label}: session ended: ${err.message}`);
          else this.logger.warn(`pg_wf: ${this.label}: connection error: ${err.message}`);
          if (this.client === client) this.drop();
        });
        client.on('end', () => {
          if (this.client === client) this.drop();
        });
        try {
          await client.connect();
          if (this.setup) await client.query(this.setup);
        } catch (err) {
          client.end().catch(() => undefined);
          throw err;
        }
        // node-postgres keeps no transaction status: read it from the protocol's ReadyForQuery
        const conn = (client as unknown as { connection?: NodeJS.EventEmitter }).connection;
        conn?.on('readyForQuery', (msg: { status?: string }) => {
          if (typeof msg?.status === 'string') this.txStatus = msg.status;
        });
        this.txStatus = 'I';
        this.pid = (client as unknown as { processID: number | null }).processID ?? undefined;
        this.client = client;
        return client;
      })().finally(() => (this.connecting = undefined));
    }
    return this.connecting;
  }

  private drop(): void {
    this.client = undefined;
    this.pid = undefined;
  }

  query(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    return this.exclusive(async () => (await this.get()).query(text, values));
  }

  /** Runs fn alone on the connection: no other caller's statement in between. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    const client = this.client;
    this.drop();
    if (client) await client.end().catch(() => undefined);
  }
}

interface QueueReg {
  name: string;
  given: number | undefined;
  handlers: Map<string | undefined, Handler>;
}

interface Running {
  job: Job;
  slot: Slot;
  phase: 'handler' | 'finishing';
  settled: Deferred;
  abandoned: Deferred<'abandoned'>;
}

class Slot {
  readonly conn: Connection;
  claiming = false;
  job: Job | undefined;
  loop: Promise<void> = Promise.resolve();

  constructor(readonly queue: string, readonly name: string, config: pg.ClientConfig, logger: Logger) {
    this.conn = new Connection({ application_name: `pg_wf ${name}`.slice(0, 63), ...config }, logger, name);
  }
}

/**
 * Runs handlers on the jobs of their queues.
 *
 * ```ts
 * const worker = new Worker({ connection: process.env.DATABASE_URL });
 * worker.register('emails', async (job) => ({ sent: await send(job.payload) }), { concurrency: 4 });
 * await worker.run(); // until SIGTERM or SIGINT
 * ```
 */
export class Worker {
  readonly name: string;
  readonly logger: Logger;
  readonly keyPrefix: string;
  private readonly versions: string[] | undefined;
  private readonly lease: Duration | undefined;
  private readonly concurrency: number;
  private readonly claimWait: Duration;
  private readonly heartbeatEvery: number;
  private readonly shutdownTimeout: number;
  private readonly shutdownRetryIn: Duration;
  private readonly handleSignals: boolean;
  private readonly config: pg.ClientConfig;
  private readonly queues = new Map<string, QueueReg>();
  private readonly slots: Slot[] = [];
  private readonly running = new Set<Running>();
  private readonly control: Connection;
  private readonly stopSignal = new AbortController();
  private started = false;
  private stopping: Promise<void> | undefined;
  private stopReason = 'stop() was called';
  private forced = false;
  private readonly force = deferred();
  private readonly done = deferred();

  constructor(options: WorkerOptions = {}) {
    this.name = options.name ?? `${hostname()}:${process.pid}`;
    this.logger = options.logger ?? defaultLogger();
    this.keyPrefix = options.keyPrefix ?? 'pg_wf';
    this.versions = options.versions;
    this.lease = options.lease;
    this.concurrency = options.concurrency ?? 1;
    this.claimWait = options.claimWait ?? 10_000;
    this.heartbeatEvery = options.heartbeatEvery ?? 10_000;
    this.shutdownTimeout = options.shutdownTimeout ?? 30_000;
    this.shutdownRetryIn = options.shutdownRetryIn ?? 1000;
    this.handleSignals = options.handleSignals ?? true;
    const c = options.connection;
    this.config = { keepAlive: true, ...(typeof c === 'string' ? connectionConfig(c) : (c ?? {})) };
    this.control = new Connection(
      { application_name: `pg_wf ${this.name} control`.slice(0, 63), ...this.config },
      this.logger,
      `${this.name} control`,
      // a heartbeat must not hang behind a handler's long transaction (it would hold up the others)
      `SET lock_timeout = '2s'`,
    );
  }

  /**
   * Registers `handler` for the jobs of `queue` (of its workflow step `options.step`, if given).
   * Its return value is the job's result. Call before `start` / `run`.
   */
  register<P = any, R = any>(queue: string, handler: Handler<P, R>, options: RegisterOptions = {}): this {
    if (this.started) throw new Error('pg_wf: register handlers before the worker starts');
    let q = this.queues.get(queue);
    if (!q) {
      q = { name: queue, given: undefined, handlers: new Map() };
      this.queues.set(queue, q);
    }
    if (q.handlers.has(options.step)) {
      throw new Error(`pg_wf: queue "${queue}" already has a handler${options.step ? ` for step "${options.step}"` : ''}`);
    }
    if (options.concurrency !== undefined) {
      if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new RangeError('pg_wf: concurrency must be at least 1');
      if (q.given !== undefined && q.given !== options.concurrency) {
        throw new Error(`pg_wf: queue "${queue}": concurrency ${q.given} was given before`);
      }
      q.given = options.concurrency;
    }
    q.handlers.set(options.step, handler as Handler);
    return this;
  }

  /** The jobs whose handlers run now. */
  get inFlight(): Job[] {
    return [...this.running].map((r) => r.job);
  }

  /** Resolves once the worker has stopped. */
  get stopped(): Promise<void> {
    return this.done.promise;
  }

  /**
   * Starts the slots and resolves at once; `stop()` ends them. The control connection is opened
   * first, so that a bad connection string rejects here.
   */
  async start(): Promise<this> {
    if (this.started) throw new Error('pg_wf: the worker was started already');
    if (this.queues.size === 0) throw new Error('pg_wf: no handlers registered');
    this.started = true;
    try {
      await this.control.get();
    } catch (err) {
      this.done.resolve();
      throw err;
    }
    if (this.stopSignal.signal.aborted) {
      // stopped while connecting
      await this.control.close();
      return this;
    }
    const total = [...this.queues.values()].reduce((n, q) => n + (q.given ?? this.concurrency), 0);
    for (const q of this.queues.values()) {
      for (let i = 0; i < (q.given ?? this.concurrency); i++) {
        const name = total === 1 ? this.name : `${this.name}/${q.name}/${i + 1}`;
        const slot = new Slot(q.name, name, this.config, this.logger);
        this.slots.push(slot);
      }
    }
    this.logger.info(
      `pg_wf: worker ${this.name}: ${[...this.queues.values()].map((q) => `${q.name} x${q.given ?? this.concurrency}`).join(', ')}` +
        (this.versions ? `, versions ${this.versions.join(',')}` : ''),
    );
    for (const slot of this.slots) slot.loop = this.slotLoop(slot);
    return this;
  }

  /**
   * Starts, and resolves once the worker has shut down: after SIGTERM or SIGINT (unless
   * `handleSignals` is false; a second signal gives the jobs in flight back at once), or `stop()`.
   */
  async run(): Promise<void> {
    const onSignal = (sig: NodeJS.Signals) => {
      if (!this.stopping) this.stopReason = `received ${sig}`;
      this.stop(this.stopping ? { force: true } : {}).catch((err: Error) =>
        this.logger.error(`pg_wf: worker ${this.name}: shutdown failed: ${err.message}`),
      );
    };
    if (this.handleSignals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    try {
      await this.start();
      await this.done.promise;
    } finally {
      if (this.handleSignals) {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    }
  }

  /**
   * Shuts down: no new claims (the waiting ones are cancelled); jobs in flight get `timeout` ms
   * (default `shutdownTimeout`) to finish; then those still running are given back with
   * `wf_fail(retry_in => shutdownRetryIn)` (the attempt counts, as a lost worker's does), their
   * `signal` aborted and their sessions ended. `force`: give them back now. Resolves once stopped.
   */
  stop(options: { timeout?: number; force?: boolean } = {}): Promise<void> {
    if (options.force || options.timeout === 0) {
      this.forced = true;
      this.force.resolve();
    }
    if (!this.started) {
      // never started: nothing to stop, and it cannot start any more
      this.started = true;
      this.done.resolve();
      this.stopping = this.done.promise;
    }
    if (!this.stopping) this.stopping = this.shutdown(options.timeout ?? this.shutdownTimeout);
    return this.stopping;
  }

  private async shutdown(timeout: number): Promise<void> {
    try {
      await this.drain(timeout);
    } finally {
      await this.control.close();
      this.logger.info(`pg_wf: worker ${this.name}: stopped`);
      this.done.resolve();
    }
  }

  private async drain(timeout: number): Promise<void> {
    this.stopSignal.abort();
    this.logger.info(
      `pg_wf: worker ${this.name}: ${this.stopReason}; no new claims, ${this.running.size} job(s) in flight get ${timeout} ms to finish`,
    );
    const cancelling = this.cancelWaitingClaims();
    const timer = setTimeout(() => this.force.resolve(), Math.max(0, timeout));
    try {
      while (this.running.size > 0) {
        const all = Promise.all([...this.running].map((r) => r.settled.promise));
        if ((await Promise.race([all.then(() => 'settled'), this.force.promise.then(() => 'force')])) === 'force') break;
      }
    } finally {
      clearTimeout(timer);
    }
    for (const r of [...this.running]) if (r.phase === 'handler') await this.giveBack(r, timeout);
    await Promise.all(this.slots.map((s) => s.loop));
    await cancelling;
  }

  /** Cancels the claims that wait (again while a slot is still in one: its claim may not have reached the server). */
  private async cancelWaitingClaims(): Promise<void> {
    for (let round = 0; this.slots.some((s) => s.claiming); round++) {
      for (const slot of this.slots) {
        if (!slot.claiming || slot.conn.pid === undefined) continue;
        try {
          // only while the claim itself runs: a cancel that reached a handler's statement would fail it
          await this.control.query(
            `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
              WHERE pid = $1 AND state = 'active' AND query LIKE '%wf_claim(%'`,
            [slot.conn.pid],
          );
        } catch (err) {
          this.logger.debug(`pg_wf: ${slot.name}: could not cancel its claim: ${(err as Error).message}`);
        }
      }
      await delay(round < 10 ? 100 : 1000);
    }
  }

  private async giveBack(r: Running, timeout: number): Promise<void> {
    const { job, slot } = r;
    job.finished = 'given_back';
    job.markLost('given back at shutdown');
    r.abandoned.resolve('abandoned');
    const reason = this.forced
      ? `worker ${this.name} shut down at once: the job was given back`
      : `worker ${this.name} shut down: the job was given back after ${timeout} ms`;
    // A lock of the handler's open transaction must not hold the give-back: wait 2 s at most,
    // then end the handler's session (which rolls it back) and try again.
    const fail = () =>
      this.control.exclusive(async () => {
        const c = await this.control.get();
        await c.query('BEGIN');
        try {
          await c.query(`SET LOCAL lock_timeout = '2s'`);
          const status = await job.call<string | null>(c, 'wf_fail', [reason, 'text'], {
            retry_in: [interval(this.shutdownRetryIn), 'interval'],
          });
          await c.query('COMMIT');
          return status;
        } catch (err) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      });
    let status: string | null | undefined;
    let waited = false;
    try {
      status = await fail();
    } catch (err) {
      waited = true;
      this.logger.debug(`pg_wf: ${job}: the give-back waits for the handler's transaction (${(err as Error).message})`);
    }
    await this.endSession(slot);
    if (waited) {
      try {
        status = await fail();
      } catch (err) {
        this.logger.error(`pg_wf: ${job}: could not give it back (${(err as Error).message}); the server recovers it, its session is ended`);
      }
    }
    if (status === null && waited) {
      this.logger.warn(`pg_wf: ${job}: still running at shutdown in a transaction; its session was ended and the server recovered the job`);
    } else if (status === null) this.logger.warn(`pg_wf: ${job}: still running at shutdown, but no longer this worker's`);
    else if (status !== undefined) this.logger.warn(`pg_wf: ${job}: still running at shutdown, given back (wf_fail -> ${status})`);
    this.running.delete(r);
    r.settled.resolve();
  }

  /** Ends a slot's session now (a busy backend reads no Terminate message until its statement ends). */
  private async endSession(slot: Slot): Promise<void> {
    const pid = slot.conn.pid;
    slot.conn.ending = true;
    if (pid !== undefined) {
      await this.control.query('SELECT pg_terminate_backend($1)', [pid]).catch((err: Error) => {
        this.logger.debug(`pg_wf: ${slot.name}: could not end its session: ${err.message}`);
      });
    }
    await slot.conn.close();
  }

  private async slotLoop(slot: Slot): Promise<void> {
    let backoff = 500;
    while (!this.stopSignal.signal.aborted) {
      let client: pg.Client;
      try {
        client = await slot.conn.get();
        backoff = 500;
      } catch (err) {
        if (this.stopSignal.signal.aborted) break;
        this.logger.warn(`pg_wf: ${slot.name}: cannot connect (${(err as Error).message}); trying again in ${backoff} ms`);
        await delay(backoff, undefined, { signal: this.stopSignal.signal }).catch(() => undefined);
        backoff = Math.min(backoff * 2, 10_000);
        continue;
      }
      const row = await this.claim(slot, client);
      if (row && (await this.execute(slot, client, row)) === 'abandoned') return; // giveBack ends its session
    }
    await slot.conn.close();
  }

  private async claim(slot: Slot, client: pg.Client): Promise<(ClaimRow & { lease_left: number | null }) | undefined> {
    if (this.stopSignal.signal.aborted) return undefined;
    slot.claiming = true;
    try {
      const res = await client.query(CLAIM_SQL, [
        slot.queue,
        slot.name,
        interval(this.lease) ?? null,
        interval(this.claimWait),
        this.versions ?? null,
      ]);
      return res.rows[0];
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.code === '57014') {
        if (!this.stopSignal.signal.aborted) this.logger.warn(`pg_wf: ${slot.name}: a claim was cancelled`);
      } else if (e.code === undefined || slot.conn.client !== client) {
        if (!this.stopSignal.signal.aborted) {
          this.logger.warn(`pg_wf: ${slot.name}: claim failed (${e.message}); reconnecting`);
          await delay(500, undefined, { signal: this.stopSignal.signal }).catch(() => undefined);
        }
        await slot.conn.close();
      } else {
        // e.g. no right to work the queue: do not spin
        this.logger.error(`pg_wf: ${slot.name}: claim failed: ${e.message}`);
        await delay(5000, undefined, { signal: this.stopSignal.signal }).catch(() => undefined);
      }
      return undefined;
    } finally {
      slot.claiming = false;
    }
  }

  private handlerFor(queue: string, step: string | null): Handler | undefined {
    const q = this.queues.get(queue);
    return q?.handlers.get(step ?? undefined) ?? q?.handlers.get(undefined);
  }

  /** Runs one job; 'abandoned' when it was given back at shutdown. */
  private async execute(slot: Slot, client: pg.Client, row: ClaimRow & { lease_left: number | null }): Promise<'done' | 'abandoned'> {
    const host: JobHost = {
      keyPrefix: this.keyPrefix,
      logger: this.logger,
      txStatus: () => slot.conn.txStatus,
      control: (fn) => this.control.exclusive(async () => fn(await this.control.get())),
    };
    const job = new Job(row, client, slot.name, host);
    const r: Running = { job, slot, phase: 'handler', settled: deferred(), abandoned: deferred() };
    this.running.add(r);
    slot.job = job;
    this.logger.debug(`pg_wf: ${job}: claimed by ${slot.name}`);
    let period = this.heartbeatEvery;
    if (row.lease_left !== null && row.lease_left !== undefined) period = Math.max(50, Math.min(period, (Number(row.lease_left) * 1000) / 3));
    const beats = this.heartbeats(job, period);
    try {
      const handler = this.handlerFor(job.queue, job.step);
      const run = Promise.resolve()
        .then(() => {
          if (!handler) throw new Error(`worker ${this.name} has no handler for step "${job.step}" of queue "${job.queue}"`);
          return handler(job);
        })
        .then(
          (value) => ({ ok: true as const, value }),
          (error: unknown) => ({ ok: false as const, error }),
        );
      const outcome = await Promise.race([run, r.abandoned.promise]);
      if (outcome === 'abandoned') {
        void run.then((o) => {
          if (!o.ok && !(o.error instanceof JobInterrupt)) {
            this.logger.debug(`pg_wf: ${job}: its handler, given back, ended with ${formatError(o.error, 0)}`);
          }
        });
        return 'abandoned';
      }
      r.phase = 'finishing';
      clearInterval(beats);
      await this.finish(slot, job, outcome);
      return 'done';
    } finally {
      clearInterval(beats);
      slot.job = undefined;
      if (this.running.delete(r)) r.settled.resolve();
    }
  }

  private heartbeats(job: Job, period: number): NodeJS.Timeout {
    let beating = false;
    return setInterval(() => {
      if (beating || job.finished !== undefined || job.lost) return;
      beating = true;
      job
        .heartbeat()
        .catch((err: Error) => {
          if (err instanceof JobLost) this.logger.warn(`pg_wf: ${job}: ${err.reason}; the handler should stop`);
          else this.logger.warn(`pg_wf: ${job}: heartbeat failed (${err.message}); trying again`);
        })
        .finally(() => (beating = false));
    }, period);
  }

  /** Records how the handler ended, as the job context left it. */
  private async finish(slot: Slot, job: Job, outcome: { ok: true; value: unknown } | { ok: false; error: unknown }): Promise<void> {
    try {
      if (outcome.ok) {
        if (job.finished === undefined) {
          if (slot.conn.txStatus !== 'I') {
            this.logger.warn(`pg_wf: ${job}: the handler left a transaction open; rolled back`);
            await job.client.query('ROLLBACK');
          }
          try {
            await job.complete((outcome.value ?? null) as Json);
          } catch (err) {
            if ((err as { code?: string }).code === undefined) throw err;
            // the server refused the result (too large, ...): the attempt fails, saying why
            await this.fail(slot, job, err);
          }
        } else if (job.finished === 'completed' && outcome.value !== undefined) {
          this.logger.debug(`pg_wf: ${job}: completed by the handler; its return value is not used`);
        } else if (job.finished === 'refused') {
          await this.endLost(job, job.lostReason);
        }
        return;
      }
      const error = outcome.error;
      if (error instanceof Suspended) {
        this.logger.info(`pg_wf: ${job}: parked (${error.message})`);
      } else if (error instanceof JobLost) {
        if (!['stale', 'failed', 'cancelled', 'given_back'].includes(job.finished ?? '')) {
          this.logger.warn(`pg_wf: ${job}: no longer this worker's (${error.reason}); dropped`);
          await this.endLost(job, error.reason);
        }
      } else if (job.finished === 'completed') {
        this.logger.error(`pg_wf: ${job}: the handler threw after completing the job: ${formatError(error, 0)}`);
      } else {
        await this.fail(slot, job, error);
      }
    } catch (err) {
      // the session may be broken; ending it makes the server recover the job
      this.logger.error(`pg_wf: ${job}: could not record how it ended (${(err as Error).message}); its session is ended, the server recovers it`);
      await this.endSession(slot);
    }
  }

  private async fail(slot: Slot, job: Job, error: unknown): Promise<void> {
    const message = formatError(error);
    const permanent = error instanceof PermanentError;
    const args = [
      [message, 'text'] as [string, string],
      {
        retry_in: [interval(error instanceof RetryAfter ? error.retryIn : undefined), 'interval'] as [unknown, string],
        permanent: [permanent ? true : undefined, 'boolean'] as [unknown, string],
      },
    ];
    let status: string | null;
    try {
      if (slot.conn.client !== job.client) throw new Error("the job's connection is gone");
      if (slot.conn.txStatus !== 'I') await job.client.query('ROLLBACK');
      status = await job.call<string | null>(job.client, 'wf_fail', ...args);
    } catch (err) {
      if ((err as { code?: string }).code !== undefined) throw err;
      // its session is gone: the server recovers the job, or this fails it first
      status = await this.control.exclusive(async () => job.call<string | null>(await this.control.get(), 'wf_fail', ...args));
    }
    job.finished = 'failed';
    const first = message.split('\n', 1)[0];
    if (status === null) job.logStale('wf_fail');
    else if (status === 'failed') {
      this.logger.warn(`pg_wf: ${job} failed for good${permanent ? ' (PermanentError)' : ` after ${job.attempt} attempts`}: ${first}`);
    } else this.logger.info(`pg_wf: ${job} failed: ${first}; wf_fail -> ${status}, retried later`);
    this.logger.debug(`pg_wf: ${job}: ${message}`);
  }

  /** Ends an attempt the handler gave up on: a job whose cancel was requested ends `cancelled` only when its attempt ends. */
  private async endLost(job: Job, reason: string): Promise<void> {
    try {
      const status = await this.control.exclusive(async () =>
        job.call<string | null>(await this.control.get(), 'wf_fail', [`stopped: ${reason}`, 'text']),
      );
      job.finished = 'failed';
      if (status !== null) this.logger.info(`pg_wf: ${job}: its attempt ended (wf_fail -> ${status})`);
    } catch (err) {
      this.logger.debug(`pg_wf: ${job}: wf_fail after the loss: ${(err as Error).message}`);
    }
  }
}
