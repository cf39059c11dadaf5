export { enqueue, enqueueBatch, submit, signal, signalWithStart, waitJob, waitWorkflow, getWorkflow, cancel, retry, cancelWorkflow, configureQueue, schedule, unschedule, type EnqueueOptions, type QueueSettings, } from './client.js';
export { Worker, type Handler, type HandlerOptions, type WorkerOptions } from './worker.js';
export { Job, type JobState } from './job.js';
export { PermanentError, RetryError, JobLostError, JobSuspended, formatError } from './errors.js';
export { connectionConfig } from './dsn.js';
export { levelLogger, defaultLogger, type Logger, type LogLevel } from './logger.js';
export type { Json, Queryable, Duration, Timestamp, StepSpec, WorkflowSpec, WaitResult, ChildOutcome, EventRecord, } from './types.js';
