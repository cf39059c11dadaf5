"""Exceptions of the pg_wf library.

Two kinds:
- errors a handler raises to tell the worker how a job failed
  (`PermanentError`, `RetryAfter`) or that the library raises into a handler
  for an outcome it may want to handle (`EventTimeout`, `ChildrenTimeout`);
- control flow that ends a handler's run (`JobInterrupt` and its subclasses
  `Suspended` and `JobLost`). They derive from BaseException, like
  KeyboardInterrupt, so that a handler's `except Exception:` does not swallow
  them; the Worker catches them and logs what happened.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Optional, Union


class PermanentError(Exception):
    """Raise from a handler to fail the job for good: `wf_fail(permanent => true)`,
    no further attempts (it goes to the dead letter, status `failed`)."""


class RetryAfter(Exception):
    """Raise from a handler to fail this attempt and retry after `delay`
    (seconds or a timedelta) instead of the queue's backoff:
    `wf_fail(retry_in => delay)`. The attempt counts as usual."""

    def __init__(self, delay: Union[float, timedelta], message: str = ""):
        super().__init__(message or f"retry after {delay}")
        self.retry_in = delay


class EventTimeout(Exception):
    """`Job.await_event` found that the event's timeout passed before a signal."""

    def __init__(self, event: str):
        super().__init__(f"event {event!r} timed out")
        self.event = event


class ChildrenTimeout(Exception):
    """`Job.await_children` found that its timeout passed before every child finished.
    `outcomes` holds the outcomes that did arrive."""

    def __init__(self, outcomes: dict):
        super().__init__("child workflows did not finish before the timeout")
        self.outcomes = outcomes


class JobInterrupt(BaseException):
    """Ends a handler's run: the job is parked or no longer this worker's.
    Not an error; the Worker catches it."""


class Suspended(JobInterrupt):
    """The job parked itself (`sleep`, `await_event`, `await_children`): it will be
    claimed again, and the handler runs again from the start with the job's
    checkpoints and events."""

    def __init__(self, status: str, reason: str):
        super().__init__(f"{reason}: {status}")
        self.status, self.reason = status, reason


class JobLost(JobInterrupt):
    """The job's fencing token went stale: the job was cancelled, reclaimed after
    a lost lease, taken back past its max_run_time, or given back at shutdown.
    Nothing this attempt writes through pg_wf counts any more."""

    def __init__(self, reason: str, job: Optional[object] = None):
        super().__init__(reason)
        self.reason, self.job = reason, job
