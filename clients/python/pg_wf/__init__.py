"""pg_wf: a thin Python library over pg_wf's SQL API (a durable job queue and
workflow engine inside PostgreSQL).

Producers and operators call the functions of `pg_wf.client` with a psycopg 3
connection (they join its transaction); workers register handlers on a
`Worker`, which claims, heartbeats, completes and fails jobs, and shuts down
gracefully. The producer calls also take a psycopg AsyncConnection (then
await them). Needs the extension's schema 1.6.
"""
from .client import (Outcome, cancel, cancel_where, cancel_workflow, configure_queue,
                     enable_schedule, enqueue, enqueue_batch, retry, retry_where, schedule, signal,
                     signal_with_start, submit, unschedule, wait_job, wait_workflow, workflow)
from .errors import (ChildrenTimeout, EventTimeout, JobInterrupt, JobLost, PermanentError,
                     RetryAfter, Suspended)
from .job import ChildOutcome, Job
from .worker import Worker, format_error

__version__ = "1.6.0"

__all__ = [
    "Worker", "Job", "ChildOutcome", "Outcome", "format_error",
    "enqueue", "enqueue_batch", "submit", "signal", "signal_with_start", "wait_job",
    "wait_workflow", "workflow", "cancel", "cancel_workflow", "retry", "cancel_where",
    "retry_where", "configure_queue", "schedule", "unschedule", "enable_schedule",
    "PermanentError", "RetryAfter", "EventTimeout", "ChildrenTimeout", "JobInterrupt",
    "Suspended", "JobLost",
]
