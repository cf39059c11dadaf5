// Types shared by the client functions and the worker.

/** Any JSON value: what a payload, a result, a checkpoint's output or an event's payload may be. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Anything that runs SQL: a `pg.Client`, a `pg.PoolClient` (inside your transaction: pass the client
 * that ran `BEGIN`), or a `pg.Pool` (each call in its own transaction).
 */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

/**
 * A length of time: a number of milliseconds (as `setTimeout` takes), or a PostgreSQL interval as
 * text (`'5 seconds'`, `'2 days'`, `'00:10:00'`).
 */
export type Duration = number | string;

/** A point in time: a `Date`, or a timestamp PostgreSQL reads (`'2026-12-01T09:00:00Z'`). */
export type Timestamp = Date | string;

/** One step of a workflow spec (see the README's Workflows section for every key). */
export interface StepSpec {
  name: string;
  queue?: string;
  payload?: Json;
  after?: string[];
  priority?: number;
  max_attempts?: number;
  run_at?: string;
  key?: string;
  version?: string;
  [key: string]: Json | undefined;
}

/** A workflow spec, as `wf_submit` takes it (snake_case keys: it is sent to the server as is). */
export interface WorkflowSpec {
  name?: string;
  queue?: string;
  /** signal-with-start: while a workflow with this key is active, submitting returns it */
  key?: string;
  version?: string;
  steps: StepSpec[];
  [key: string]: Json | StepSpec[] | undefined;
}

/**
 * What `waitJob` and `waitWorkflow` return: the status and, once the job or workflow has finished,
 * its result and error. After a timeout, `status` is the one it has then (`pending`, `running`,
 * ...) and `finished` is false.
 */
export interface Outcome<R = Json> {
  status: string;
  result: R | null;
  error: string | null;
  /** done, failed or cancelled */
  finished: boolean;
  /** done */
  ok: boolean;
}

/** A child workflow's outcome, as delivered into its parent's events (`wf:child:<name>`). */
export interface ChildOutcome {
  /** done, failed or cancelled */
  status: string;
  /** its final steps' results by step name (the done ones) */
  results: Record<string, Json>;
  /** the first failed step's error */
  error: string | null;
  workflowId: string | null;
  /** done */
  ok: boolean;
}
