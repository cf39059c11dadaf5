// pg-wf: the worker library of pg_wf, the durable job queue and workflow engine inside PostgreSQL.
export { enqueue, enqueueBatch, submit, signal, signalWithStart, waitJob, waitWorkflow, workflow, cancel, retry, cancelWorkflow, retryWhere, cancelWhere, enableSchedule, configureQueue, schedule, unschedule, } from './client.js';
export { Worker } from './worker.js';
export { Job } from './job.js';
export { PermanentError, RetryAfter, EventTimeout, ChildrenTimeout, JobInterrupt, Suspended, JobLost, formatError, } from './errors.js';
export { connectionConfig } from './dsn.js';
export { levelLogger, defaultLogger } from './logger.js';
