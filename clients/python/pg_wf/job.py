"""The job context a handler gets: what the claim returned, and the calls a
running job makes with its fencing token (queue, id, attempt).

A handler may run more than once for one job: after a crash, a retry, or a
park (sleep, await_event, await_children), the job is claimed again and the
handler starts over from the top, with the job's checkpoints and events.
Code before a park therefore runs again; wrap what must run once in
`checkpoint`.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from datetime import datetime
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, TypeVar

import psycopg
from psycopg import pq

from . import _sql
from .client import Interval
from .errors import ChildrenTimeout, EventTimeout, JobLost, Suspended

log = logging.getLogger("pg_wf.job")

T = TypeVar("T")

CHILD_EVENT = "wf:child:"
SLEEP_CHECKPOINT = "pg_wf.sleep:"


class ChildOutcome(NamedTuple):
    """A child workflow's outcome, as delivered into its parent's events."""

    status: str            # done, failed or cancelled
    results: Dict[str, Any]  # its final steps' results by step name (done ones)
    error: Optional[str]   # the first failed step's error
    workflow_id: Optional[uuid.UUID]

    @property
    def ok(self) -> bool:
        return self.status == "done"


class Job:
    """One claimed job.

    Attributes from the claim: `queue`, `id`, `attempt`, `payload`, `inputs`
    (the results of the steps it runs after, by step name), `workflow_id`,
    `step` (its step name), `priority`, `max_attempts`, `checkpoints`, `events`,
    `lease_expires_at`; and `conn`, the connection (session) that owns the job,
    in autocommit mode, for the handler's own statements.
    """

    def __init__(self, worker: Any, conn: psycopg.Connection, row: Dict[str, Any], worker_name: str):
        self._worker = worker
        self.conn = conn
        self.worker_name = worker_name
        self.queue: str = row["queue"]
        self.id: int = row["id"]
        self.attempt: int = row["attempt"]
        self.payload: Any = row["payload"]
        self.inputs: Dict[str, Any] = row["inputs"] or {}
        self.workflow_id: Optional[uuid.UUID] = row["workflow_id"]
        self.step: Optional[str] = row["step_name"]
        self.priority: int = row["priority"]
        self.max_attempts: int = row["max_attempts"]
        self.lease_expires_at: Optional[datetime] = row["lease_expires_at"]
        self.checkpoints: Dict[str, Any] = dict(row["checkpoints"] or {})
        self.events: Dict[str, Any] = dict(row["events"] or {})
        self._enqueue_key: Optional[str] = row["idempotency_key"]
        self._key_prefix: str = worker.key_prefix
        self._lost = threading.Event()
        self._lost_reason = ""
        self._finished: Optional[str] = None   # 'completed', 'stale', 'failed', 'parked', ...
        self._tx: Optional[psycopg.Transaction] = None
        self._steps: List[dict] = []
        self._sleeps = 0
        self._children: List[str] = []

    def __str__(self) -> str:
        step = f"{self.step}, " if self.step else ""
        return f"job {self.queue}/{self.id} ({step}attempt {self.attempt})"

    def __repr__(self) -> str:
        return f"<{self}>"

    # ------------------------------------------------------------ identity

    @property
    def token(self) -> tuple:
        """The fencing token (queue, id, attempt) of this claim."""
        return (self.queue, self.id, self.attempt)

    @property
    def idempotency_key(self) -> str:
        """A key for outside APIs (an `Idempotency-Key` header): the enqueue's
        idempotency key, else `<prefix>:<queue>:<id>`. The same for every attempt
        and recovery of this job, never per attempt: a retry after a crash that
        happened after the outside call must present the same key, or the
        outside API performs the effect twice."""
        if self._enqueue_key is not None:
            return self._enqueue_key
        return f"{self._key_prefix}:{self.queue}:{self.id}"

    @property
    def lost(self) -> bool:
        """True once a heartbeat (or another call) found the token stale: the job was
        cancelled, reclaimed, or ran past its max_run_time. Stop working on it."""
        return self._lost.is_set()

    # --------------------------------------------------------- in the handler

    def checkpoint(self, name: str, fn: Callable[[], T]) -> T:
        """Runs `fn` once across attempts: its value (JSON) is recorded with
        `wf_checkpoint`, and a later attempt (after a crash, a retry, a park) gets
        it back from its claim without running `fn` again. Inside
        `job.transaction()` the record commits with the block."""
        if name in self.checkpoints:
            log.debug("%s: checkpoint %r restored", self, name)
            return self.checkpoints[name]
        self._check()
        value = fn()
        status = self._call(self.conn, "wf_checkpoint", (name, "text"), (value, "jsonb"))
        if status is None:
            self._mark_lost("wf_checkpoint found the token stale")
            raise JobLost(self._lost_reason, self)
        if status == "already_recorded":  # recorded by this attempt before: keep the first
            log.warning("%s: checkpoint %r was already recorded; the first value is kept",
                        self, name)
            return self.checkpoints.get(name, value)
        self.checkpoints[name] = value
        return value

    def sleep(self, delay: Interval, name: Optional[str] = None) -> None:
        """A durable sleep: parks the job (`wf_snooze`: pending, no worker, no
        attempt spent) and ends this run; the handler runs again after `delay`,
        and this call then returns at once. The sleep is a checkpoint
        (`pg_wf.sleep:<name>`); unnamed sleeps are numbered in call order, so a
        handler must make them in the same order on every run."""
        self._sleeps += 1
        checkpoint = SLEEP_CHECKPOINT + (name if name is not None else str(self._sleeps))
        self._not_in_transaction("sleep")
        if checkpoint in self.checkpoints:
            until = (self.checkpoints[checkpoint] or {}).get("until")
            left = float(self.conn.execute(
                "SELECT extract(epoch FROM %s::timestamptz - clock_timestamp())",
                (until,)).fetchone()[0]) if until else 0.0
            if left <= 0:
                return
            status = self._parking(lambda: self._call(self.conn, "wf_snooze", (left, "interval")))
        else:
            def snooze() -> Optional[str]:
                with self.conn.transaction():
                    recorded = self.conn.execute(
                        "SELECT wf_checkpoint(%s::text, %s::bigint, %s::int, %s::text,"
                        "       jsonb_build_object('until', clock_timestamp() + %s::interval))",
                        (self.queue, self.id, self.attempt, checkpoint, _sql.interval(delay))).fetchone()[0]
                    return self._call(self.conn, "wf_snooze", (delay, "interval")) if recorded else None
            status = self._parking(snooze)
        self._park(status, f"sleep {delay}" if isinstance(delay, str) else f"sleep {delay} s")

    def await_event(self, event: str, timeout: Optional[Interval] = None) -> Any:
        """The payload of `event` once it was signalled (`wf_signal`). Until then,
        parks the job (`wf_await_event`: waiting, no worker, no attempt spent)
        and ends this run; the handler runs again when the signal arrives (or at
        once if it was signalled before). After the timeout: EventTimeout."""
        delivered = self.events.get(event)
        if delivered is not None:
            if delivered.get("status") == "signalled":
                return delivered.get("payload")
            raise EventTimeout(event)
        self._not_in_transaction("await_event")
        status = self._parking(lambda: self._call(self.conn, "wf_await_event", (event, "text"),
                                                  ("timeout", timeout, "interval")))
        self._park(status, f"await_event {event!r}")

    def start_child(self, name: str, spec: dict) -> uuid.UUID:
        """Starts the child workflow `name` (`wf_start_child`; `spec` is what
        wf_submit takes, a single job is a one-step spec). The same name again,
        in this run or a later one, returns the same child: call it on every run
        before `await_children`."""
        child = self._call(self.conn, "wf_start_child", (name, "text"), (spec, "jsonb"))
        if child is None:
            self._mark_lost("wf_start_child: the token is stale or a cancel was requested")
            raise JobLost(self._lost_reason, self)
        if name not in self._children:
            self._children.append(name)
        return child

    def await_children(self, timeout: Optional[Interval] = None) -> Dict[str, ChildOutcome]:
        """The outcomes of the children started with `start_child`, by name, once
        all have finished. Until then parks the job (`wf_await_children`) and ends
        this run; the handler runs again with the outcomes in its events. A child
        that failed is an outcome with status 'failed', not an exception."""
        outcomes = self.child_outcomes()
        if not self._children or set(self._children) <= outcomes.keys():
            return outcomes
        if (self.events.get("wf:children") or {}).get("status") == "timed_out":
            raise ChildrenTimeout(outcomes)
        self._not_in_transaction("await_children")
        status = self._parking(lambda: self._call(self.conn, "wf_await_children",
                                                  ("timeout", timeout, "interval")))
        self._park(status, f"await_children ({len(self._children)})")

    def child_outcomes(self) -> Dict[str, ChildOutcome]:
        """The child outcomes delivered so far (from the claim's events)."""
        return {name[len(CHILD_EVENT):]: ChildOutcome(o.get("status"), o.get("results") or {},
                                                      o.get("error"), _uuid(o.get("workflow_id")))
                for name, o in self.events.items() if name.startswith(CHILD_EVENT)}

    def add_steps(self, steps: List[dict]) -> None:
        """Fan-out: steps (wf_submit step objects) added to this job's workflow when
        it completes, in the same transaction (`wf_complete_with_steps`). Their
        "after" may name this step, other new steps and done steps."""
        self._steps.extend(steps)

    def heartbeat(self) -> None:
        """Tells pg_wf the job is alive and extends its lease. The Worker does this by
        itself; call it only to learn at once whether the job is still yours.
        Raises JobLost if it is not."""
        self._check()
        if not self._worker._heartbeat(self):
            raise JobLost(self._lost_reason, self)

    def progress(self, report: Any) -> None:
        """Reports progress (`wf_progress`, a small JSON value shown in wf.jobs and
        wf_workflow; no WAL). Raises JobLost if the job is no longer yours."""
        self._check()
        if not self._worker._control_call(self, "wf_progress", (report, "jsonb")):
            self._mark_lost("wf_progress found the token stale")
            raise JobLost(self._lost_reason, self)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A transaction on the job's connection for the job's side effect and its
        completion, so that both commit or neither does (exactly-once effects):

            with job.transaction() as conn:
                conn.execute("INSERT INTO sent ...")
                job.complete({"sent": True})

        If `complete` finds the token stale, the block is rolled back and left
        (the rest of it does not run); the handler goes on after it."""
        before = self._finished
        try:
            with self.conn.transaction() as tx:
                outer, self._tx = self._tx, tx
                try:
                    yield self.conn
                finally:
                    self._tx = outer
        except BaseException:
            if before is None and self._finished == "completed":
                self._finished = None  # the completion rolled back with the block
            raise

    def complete(self, result: Any = None, steps: Optional[List[dict]] = None) -> bool:
        """Completes the job now (`wf_complete`, or `wf_complete_with_steps` when steps
        were given here or with `add_steps`); the handler's return value is then
        not used. True if it was still yours. A stale token is logged and
        returns False (inside `job.transaction()`: rolls the block back).
        Inside a transaction, only `job.transaction()`'s: it knows whether the
        completion committed (if the block fails, the job is not done)."""
        if self._finished is not None:
            raise RuntimeError(f"{self!r} already ended ({self._finished})")
        if self._tx is None and self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
            raise RuntimeError("job.complete() inside a transaction of your own: use"
                               " `with job.transaction()`, which knows whether it commits")
        steps = list(steps) if steps is not None else []
        steps = self._steps + steps
        self._finished = "completing"  # the heartbeats stop here
        try:
            if steps:
                ok = self._call(self.conn, "wf_complete_with_steps", (result, "jsonb"), (steps, "jsonb"))
            else:
                ok = self._call(self.conn, "wf_complete", (result, "jsonb"))
        except BaseException:
            self._finished = None
            raise
        if ok:
            self._finished = "completed"
            log.debug("%s: completed", self)
            return True
        self._finished = "stale"
        self._mark_lost("wf_complete refused a stale token")
        self._worker._log_stale(self, "wf_complete")
        if self._tx is not None:
            raise psycopg.Rollback(self._tx)
        return False

    # ------------------------------------------------------------- internals

    def _call(self, conn: Any, function: str, *args: tuple) -> Any:
        """SELECT function(queue, id, attempt, args...) on `conn`."""
        call_args = [(None, self.queue, "text"), (None, self.id, "bigint"), (None, self.attempt, "int")]
        for a in args:
            call_args.append(a if len(a) == 3 else (None, a[0], a[1]))
        return _sql.scalar(conn, function, call_args)

    def _parking(self, park: Callable[[], Optional[str]]) -> Optional[str]:
        """Runs a call that parks the job; the heartbeats stop meanwhile."""
        self._check()
        self._finished = "parking"
        try:
            return park()
        except BaseException:
            self._finished = None
            raise

    def _park(self, status: Optional[str], what: str) -> None:
        if status is None:
            self._mark_lost(f"{what}: the token is stale")
            raise JobLost(self._lost_reason, self)
        if status == "cancelled":
            self._finished = "cancelled"
            self._mark_lost(f"{what}: the job was cancelled")
            raise JobLost(self._lost_reason, self)
        self._finished = "parked"
        raise Suspended(status, what)

    def _check(self) -> None:
        if self._lost.is_set():
            raise JobLost(self._lost_reason, self)

    def _not_in_transaction(self, what: str) -> None:
        if self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
            raise RuntimeError(f"job.{what}() parks the job and ends the handler's run: call it"
                               " outside a transaction (its rollback would undo the park)")

    def _mark_lost(self, reason: str) -> None:
        if not self._lost.is_set():
            self._lost_reason = reason
            self._lost.set()


def _uuid(value: Any) -> Optional[uuid.UUID]:
    return uuid.UUID(value) if isinstance(value, str) else value
