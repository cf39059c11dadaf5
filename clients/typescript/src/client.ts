// The producer's side: each function is one pg_wf SQL call on the connection you pass, so it
// joins your transaction when you pass the client that ran BEGIN (roll back, and nothing happened).
import { call, interval, json, timestamp, toId } from './sql.js';
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

async function one<T>(db: Queryable, q: { text: string; values: unknown[] }): Promise<T> {
  const res = await db.query(`SELECT ${q.text} AS v`, q.values);
  return res.rows[0].v as T;
}

/** Adds a job to `queue`; returns its id (an existing job's, for a repeated idempotency or dedup key). */
export async function enqueue(
  db: Queryable,
  queue: string,
  payload: Json = {},
  options: EnqueueOptions = {},
): Promise<number> {
  const q = call('wf_enqueue', [[queue, 'text'], [json(payload), 'jsonb']], {
    run_at: [timestamp(options.runAt), 'timestamptz'],
    priority: [options.priority, 'int'],
    max_attempts: [options.maxAttempts, 'int'],
    idempotency_key: [options.idempotencyKey, 'text'],
    workflow_id: [options.workflowId, 'uuid'],
    step_name: [options.stepName, 'text'],
    depends_on: [options.dependsOn, 'bigint[]'],
    key: [options.key, 'text'],
    dedup_key: [options.dedupKey, 'text'],
    on_duplicate: [options.onDuplicate, 'text'],
    max_run_time: [interval(options.maxRunTime), 'interval'],
    start_by: [timestamp(options.startBy), 'timestamptz'],
    version: [options.version, 'text'],
  });
  return toId(await one(db, q));
}

/** One job per payload, in one statement; the ids in the payloads' order. */
export async function enqueueBatch(
  db: Queryable,
  queue: string,
  payloads: Json[],
  options: { keys?: (string | null)[] } = {},
): Promise<number[]> {
  const q = call('wf_enqueue_batch', [[queue, 'text'], [json(payloads), 'jsonb']], {
    keys: [options.keys, 'text[]'],
  });
  const res = await db.query(`SELECT id FROM ${q.text} AS id`, q.values);
  return res.rows.map((r) => toId(r.id));
}

/**
 * Submits a workflow (all its steps in one statement); returns its id. With a `key` in the spec,
 * the active workflow holding that key is returned instead of starting a second one.
 */
export async function submit(db: Queryable, spec: WorkflowSpec): Promise<string> {
  return one(db, call('wf_submit', [[json(spec as Json), 'jsonb']]));
}

/**
 * Signals an event: every job waiting for it becomes ready with the payload in its events, and
 * the signal is kept for jobs that await it later. Returns the number of jobs made ready.
 */
export async function signal(db: Queryable, event: string, payload?: Json): Promise<number> {
  return one(db, call('wf_signal', [[event, 'text'], [json(payload) ?? null, 'jsonb']]));
}

/**
 * Signal-with-start: the active workflow holding `spec.key` (started from `spec` if there is
 * none) and the event signalled, in one transaction. Returns the workflow's id.
 */
export async function signalWithStart(
  db: Queryable,
  spec: WorkflowSpec,
  event: string,
  payload?: Json,
): Promise<string> {
  return one(
    db,
    call('wf_signal_with_start', [[json(spec as Json), 'jsonb'], [event, 'text'], [json(payload) ?? null, 'jsonb']]),
  );
}

const FINISHED = ['done', 'failed', 'cancelled'];

function outcome<R>(row: { status: string; result: unknown; error: string | null }): Outcome<R> {
  return {
    status: row.status,
    result: (row.result ?? null) as R | null,
    error: row.error ?? null,
    finished: FINISHED.includes(row.status),
    ok: row.status === 'done',
  };
}

/**
 * Blocks until the job has finished (woken by the commit that ends it, no polling), up to
 * `timeout` (default 30 s); returns its status, result and error, or on a timeout the status it has
 * then. Call it after the enqueue committed, on a connection that is not in that transaction.
 */
export async function waitJob<R = Json>(
  db: Queryable,
  queue: string,
  id: number,
  options: { timeout?: Duration } = {},
): Promise<Outcome<R>> {
  const q = call('wf_wait_job', [[queue, 'text'], [id, 'bigint']], { timeout: [interval(options.timeout), 'interval'] });
  const res = await db.query(`SELECT status, result, error FROM ${q.text}`, q.values);
  return outcome<R>(res.rows[0]);
}

/** `waitJob` for a workflow: `result` holds its final steps' results by step name. */
export async function waitWorkflow<R = Record<string, Json>>(
  db: Queryable,
  workflowId: string,
  options: { timeout?: Duration } = {},
): Promise<Outcome<R>> {
  const q = call('wf_wait_workflow', [[workflowId, 'uuid']], { timeout: [interval(options.timeout), 'interval'] });
  const res = await db.query(`SELECT status, result, error FROM ${q.text}`, q.values);
  return outcome<R>(res.rows[0]);
}

/** `wf_workflow`: the workflow's status, counts and every step (name, status, attempts, result, ...). */
export async function workflow(db: Queryable, workflowId: string): Promise<Record<string, any>> {
  return one(db, call('wf_workflow', [[workflowId, 'uuid']]));
}

/** Cancels a job (a running one is flagged: its heartbeat turns false). */
export async function cancel(db: Queryable, queue: string, id: number): Promise<boolean> {
  return one(db, call('wf_cancel', [[queue, 'text'], [id, 'bigint']]));
}

/** Runs a failed or cancelled job again with a fresh budget of attempts. */
export async function retry(db: Queryable, queue: string, id: number): Promise<boolean> {
  return one(db, call('wf_retry', [[queue, 'text'], [id, 'bigint']]));
}

export interface WhereOptions {
  /** only these jobs */
  ids?: number[];
  /** only jobs whose last error contains this text (case-insensitive) */
  errorContains?: string;
  /** at most this many (default 1000) */
  maxJobs?: number;
}

/** `wf_retry_where`: retries the failed or cancelled jobs of `queue` that match; returns how many. */
export async function retryWhere(db: Queryable, queue: string, where: WhereOptions = {}): Promise<number> {
  return one(
    db,
    call('wf_retry_where', [[queue, 'text']], {
      ids: [where.ids, 'bigint[]'],
      error_contains: [where.errorContains, 'text'],
      max_jobs: [where.maxJobs, 'int'],
    }),
  );
}

/**
 * `wf_cancel_where`: cancels the matching jobs of `queue` (blocked, pending, waiting, failed; running
 * ones are flagged), narrowed to `statuses` if given; returns how many.
 */
export async function cancelWhere(
  db: Queryable,
  queue: string,
  where: WhereOptions & { statuses?: string[] } = {},
): Promise<number> {
  return one(
    db,
    call('wf_cancel_where', [[queue, 'text']], {
      ids: [where.ids, 'bigint[]'],
      error_contains: [where.errorContains, 'text'],
      statuses: [where.statuses, 'text[]'],
      max_jobs: [where.maxJobs, 'int'],
    }),
  );
}

/** Cancels every unfinished step of a workflow; returns how many. */
export async function cancelWorkflow(db: Queryable, workflowId: string): Promise<number> {
  return one(db, call('wf_cancel_workflow', [[workflowId, 'uuid']]));
}

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
export async function configureQueue(db: Queryable, queue: string, settings: QueueSettings): Promise<void> {
  const q = call('wf_configure_queue', [[queue, 'text']], {
    max_attempts: [settings.maxAttempts, 'int'],
    backoff_base: [interval(settings.backoffBase), 'interval'],
    backoff_max: [interval(settings.backoffMax), 'interval'],
    lease: [interval(settings.lease), 'interval'],
    max_running: [settings.maxRunning, 'int'],
    paused: [settings.paused, 'boolean'],
    rate_limit: [settings.rateLimit, 'int'],
    rate_period: [interval(settings.ratePeriod), 'interval'],
    key_rate_limit: [settings.keyRateLimit, 'int'],
    key_concurrency: [settings.keyConcurrency, 'int'],
    fair: [settings.fair, 'boolean'],
    ordered: [settings.ordered, 'boolean'],
    max_run_time: [interval(settings.maxRunTime), 'interval'],
    version: [settings.version, 'text'],
  });
  await db.query(`SELECT ${q.text}`, q.values);
}

/** Creates or replaces a cron schedule (UTC); returns its next run. */
export async function schedule(
  db: Queryable,
  name: string,
  cron: string,
  queue: string,
  payload: Json = {},
): Promise<Date> {
  return one(db, call('wf_schedule', [[name, 'text'], [cron, 'text'], [queue, 'text'], [json(payload), 'jsonb']]));
}

/** `wf_enable_schedule`: stops or restarts a schedule; false if there is none. */
export async function enableSchedule(db: Queryable, name: string, enabled: boolean): Promise<boolean> {
  return one(db, call('wf_enable_schedule', [[name, 'text'], [enabled, 'boolean']]));
}

/** Removes a schedule; false if there was none. */
export async function unschedule(db: Queryable, name: string): Promise<boolean> {
  return one(db, call('wf_unschedule', [[name, 'text']]));
}
