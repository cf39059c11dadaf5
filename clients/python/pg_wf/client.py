"""Producer and operator calls: enqueue, submit, signal, wait for results.

Every function takes a psycopg 3 connection (or cursor) first and runs one
statement on it, so it joins the caller's transaction when there is one:

    with conn.transaction():
        conn.execute("INSERT INTO orders ...")
        pg_wf.enqueue(conn, "emails", {"order": 42})   # rolls back with the order

Without a transaction (an autocommit connection) each call commits at once.
With a psycopg AsyncConnection (or AsyncCursor) each function returns a
coroutine instead: `await pg_wf.enqueue(aconn, "emails", {...})`.
Arguments left out (None) take the server's defaults; intervals are seconds,
timedeltas or strings such as '5 minutes'. See the README of pg_wf for what
each SQL function does.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, List, NamedTuple, Optional, Sequence, Union

from . import _sql

FINISHED = ("done", "failed", "cancelled")

Interval = Union[float, int, str, timedelta]  # seconds, a timedelta or an interval string


class Outcome(NamedTuple):
    """What `wait_job` and `wait_workflow` return: the status, and when the job or
    workflow has finished, its result and error. After a timeout, `status` is the
    one it has then (`pending`, `running`, ...) and `finished` is False."""

    status: str
    result: Any
    error: Optional[str]

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def ok(self) -> bool:
        return self.status == "done"


def enqueue(conn, queue: str, payload: Any = None, *, run_at: Optional[datetime] = None,
            priority: Optional[int] = None, max_attempts: Optional[int] = None,
            idempotency_key: Optional[str] = None, workflow_id: Optional[uuid.UUID] = None,
            step_name: Optional[str] = None, depends_on: Optional[Sequence[int]] = None,
            key: Optional[str] = None, dedup_key: Optional[str] = None,
            on_duplicate: Optional[str] = None, max_run_time: Optional[Interval] = None,
            start_by: Optional[datetime] = None, version: Optional[str] = None) -> int:
    """`wf_enqueue`: a new job (or the existing one, for a repeated idempotency key or
    an active dedup key); returns its id."""
    return _sql.scalar(conn, "wf_enqueue", [
        (None, queue, "text"),
        ("payload", payload, "jsonb"),
        ("run_at", run_at, "timestamptz"),
        ("priority", priority, "int"),
        ("max_attempts", max_attempts, "int"),
        ("idempotency_key", idempotency_key, "text"),
        ("workflow_id", workflow_id, "uuid"),
        ("step_name", step_name, "text"),
        ("depends_on", depends_on, "bigint[]"),
        ("key", key, "text"),
        ("dedup_key", dedup_key, "text"),
        ("on_duplicate", on_duplicate, "text"),
        ("max_run_time", max_run_time, "interval"),
        ("start_by", start_by, "timestamptz"),
        ("version", version, "text"),
    ])


def enqueue_batch(conn, queue: str, payloads: Sequence[Any],
                  keys: Optional[Sequence[Optional[str]]] = None) -> List[int]:
    """`wf_enqueue_batch`: one job per payload in one round trip; ids in order."""
    return _sql.rows(conn, "*", "wf_enqueue_batch", [
        (None, queue, "text"), (None, list(payloads), "jsonb"), ("keys", keys, "text[]")],
        then=lambda rows: [r[0] for r in rows])


def submit(conn, spec: dict) -> uuid.UUID:
    """`wf_submit`: a whole workflow (a DAG of steps) in one statement; its id."""
    return _sql.scalar(conn, "wf_submit", [(None, spec, "jsonb")])


def signal(conn, event: str, payload: Any = None) -> int:
    """`wf_signal`: wakes every job awaiting `event` (the signal is kept for later
    awaits); returns how many jobs it made ready."""
    return _sql.scalar(conn, "wf_signal", [(None, event, "text"), ("payload", payload, "jsonb")])


def signal_with_start(conn, spec: dict, event: str, payload: Any = None) -> uuid.UUID:
    """`wf_signal_with_start`: the active workflow holding `spec["key"]` (submitted
    from `spec` if there is none) and `event` signalled, in one transaction."""
    return _sql.scalar(conn, "wf_signal_with_start", [
        (None, spec, "jsonb"), (None, event, "text"), ("payload", payload, "jsonb")])


def wait_job(conn, queue: str, id: int, timeout: Interval = 30) -> Outcome:
    """`wf_wait_job`: blocks until the job has finished (woken by the commit that
    ends it, no polling) or `timeout` passes. Call it after the enqueue committed."""
    return _sql.rows(conn, "status, result, error", "wf_wait_job", [
        (None, queue, "text"), (None, id, "bigint"), (None, timeout, "interval")],
        then=lambda rows: Outcome(*rows[0]))


def wait_workflow(conn, workflow_id: Union[uuid.UUID, str], timeout: Interval = 30) -> Outcome:
    """`wf_wait_workflow`: the same for a workflow; `result` holds its final steps'
    results by step name."""
    return _sql.rows(conn, "status, result, error", "wf_wait_workflow", [
        (None, workflow_id, "uuid"), (None, timeout, "interval")],
        then=lambda rows: Outcome(*rows[0]))


def workflow(conn, workflow_id: Union[uuid.UUID, str]) -> dict:
    """`wf_workflow`: the workflow's status, counts and steps, as a dict."""
    return _sql.scalar(conn, "wf_workflow", [(None, workflow_id, "uuid")])


def cancel(conn, queue: str, id: int) -> bool:
    """`wf_cancel`."""
    return _sql.scalar(conn, "wf_cancel", [(None, queue, "text"), (None, id, "bigint")])


def retry(conn, queue: str, id: int) -> bool:
    """`wf_retry`: a failed or cancelled job runs again with a fresh budget."""
    return _sql.scalar(conn, "wf_retry", [(None, queue, "text"), (None, id, "bigint")])


def cancel_workflow(conn, workflow_id: Union[uuid.UUID, str]) -> int:
    """`wf_cancel_workflow`."""
    return _sql.scalar(conn, "wf_cancel_workflow", [(None, workflow_id, "uuid")])


def retry_where(conn, queue: str, *, ids: Optional[Sequence[int]] = None,
                error_contains: Optional[str] = None, max_jobs: Optional[int] = None) -> int:
    """`wf_retry_where`: retries the queue's failed or cancelled jobs that match
    (ids; last_error containing the text); returns how many."""
    return _sql.scalar(conn, "wf_retry_where", [
        (None, queue, "text"), ("ids", ids, "bigint[]"), ("error_contains", error_contains, "text"),
        ("max_jobs", max_jobs, "int")])


def cancel_where(conn, queue: str, *, ids: Optional[Sequence[int]] = None,
                 error_contains: Optional[str] = None, statuses: Optional[Sequence[str]] = None,
                 max_jobs: Optional[int] = None) -> int:
    """`wf_cancel_where`: cancels the queue's matching jobs; returns how many."""
    return _sql.scalar(conn, "wf_cancel_where", [
        (None, queue, "text"), ("ids", ids, "bigint[]"), ("error_contains", error_contains, "text"),
        ("statuses", statuses, "text[]"), ("max_jobs", max_jobs, "int")])


_QUEUE_SETTINGS = {
    "max_attempts": "int", "backoff_base": "interval", "backoff_max": "interval",
    "lease": "interval", "max_running": "int", "paused": "boolean", "rate_limit": "int",
    "rate_period": "interval", "key_rate_limit": "int", "key_concurrency": "int",
    "fair": "boolean", "ordered": "boolean", "max_run_time": "interval", "version": "text",
}


def configure_queue(conn, queue: str, **settings: Any) -> None:
    """`wf_configure_queue(queue, name => value, ...)`; settings left out are kept."""
    unknown = set(settings) - set(_QUEUE_SETTINGS)
    if unknown:
        raise TypeError(f"unknown queue settings: {', '.join(sorted(unknown))}")
    return _sql.scalar(conn, "wf_configure_queue", [(None, queue, "text")] + [
        (name, value, _QUEUE_SETTINGS[name]) for name, value in settings.items()],
        then=lambda _: None)


def schedule(conn, name: str, cron: str, queue: str, payload: Any = None) -> datetime:
    """`wf_schedule`: creates or replaces a cron schedule; returns its next run."""
    return _sql.scalar(conn, "wf_schedule", [
        (None, name, "text"), (None, cron, "text"), (None, queue, "text"),
        ("payload", payload, "jsonb")])


def unschedule(conn, name: str) -> bool:
    """`wf_unschedule`."""
    return _sql.scalar(conn, "wf_unschedule", [(None, name, "text")])


def enable_schedule(conn, name: str, enabled: bool = True) -> bool:
    """`wf_enable_schedule`: stops a schedule firing, or lets it fire again."""
    return _sql.scalar(conn, "wf_enable_schedule", [(None, name, "text"), (None, enabled, "boolean")])
