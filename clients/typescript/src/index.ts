// pg-wf: the worker library of pg_wf, the durable job queue and workflow engine inside PostgreSQL.
export {
  enqueue,
  enqueueBatch,
  submit,
  signal,
  signalWithStart,
  waitJob,
  waitWorkflow,
  workflow,
  cancel,
  retry,
  cancelWorkflow,
  retryWhere,
  cancelWhere,
  enableSchedule,
  configureQueue,
  schedule,
  unschedule,
  type EnqueueOptions,
  type QueueSettings,
  type WhereOptions,
} from './client.js';
export { Worker, type Handler, type RegisterOptions, type WorkerOptions } from './worker.js';
export { Job } from './job.js';
export {
  PermanentError,
  RetryAfter,
  EventTimeout,
  ChildrenTimeout,
  JobInterrupt,
  Suspended,
  JobLost,
  formatError,
} from './errors.js';
export { connectionConfig } from './dsn.js';
export { levelLogger, defaultLogger, type Logger, type LogLevel } from './logger.js';
export type {
  Json,
  Queryable,
  Duration,
  Timestamp,
  StepSpec,
  WorkflowSpec,
  Outcome,
  ChildOutcome,
} from './types.js';
