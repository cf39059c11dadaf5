"""The Worker: runs registered handlers on the jobs of their queues.

Per queue, `concurrency` slots, each a thread with its own connection: a
claimed job belongs to the session that claimed it, so every job in flight
has a session of its own, which is also the connection its handler gets
(`job.conn`). A slot claims one job at a time with `wf_claim(wait => ...)`,
so an idle worker sleeps in the server until a commit makes a job ready
(no polling). One more connection, the control connection, sends the
heartbeats of every job in flight (a third of the lease, or
`heartbeat_every`), their progress reports, and the give-backs at shutdown.

Shutdown (`stop()`, or SIGTERM/SIGINT under `run()`): the waiting claims are
cancelled, so nothing new is claimed; jobs in flight get `shutdown_timeout`
seconds to finish; those still running then are given back with
`wf_fail(retry_in => shutdown_retry_in)`, so that another worker takes them
at once. A second signal gives them back without waiting.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from . import _sql
from .client import Interval
from .errors import JobLost, PermanentError, Suspended
from .job import Job

log = logging.getLogger("pg_wf.worker")  # the worker: start, connections, shutdown
jlog = logging.getLogger("pg_wf.job")    # each job: failures, parks, losses (claims and completions: DEBUG)

Handler = Callable[[Job], Any]

CLAIM_COLUMNS = ("id, attempt, queue, payload, workflow_id, step_name, priority, max_attempts,"
                 " idempotency_key, inputs, lease_expires_at, checkpoints, events")

_LIBRARY_DIR = os.path.dirname(os.path.abspath(__file__))


def format_error(error: BaseException, max_frames: int = 8, max_chars: int = 4000) -> str:
    """What wf_fail records for an exception: `Type: message`, then the last
    `max_frames` frames of its traceback (the worker's own frames left out),
    at most `max_chars` characters in all."""
    text = str(error)
    head = f"{type(error).__name__}: {text}" if text else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    while frames and frames[0].filename.startswith(_LIBRARY_DIR) \
            and os.path.basename(frames[0].filename) == "worker.py":
        frames = frames[1:]
    trimmed = max(0, len(frames) - max_frames)
    if trimmed:
        frames = frames[trimmed:]
    if frames:
        note = f", {trimmed} earlier frames trimmed" if trimmed else ""
        head += (f"\nTraceback (most recent call last{note}):\n"
                 + "".join(traceback.format_list(frames)).rstrip("\n"))
    return head if len(head) <= max_chars else head[:max_chars - 1] + "…"


@dataclass
class _Queue:
    name: str
    given: Optional[int] = None  # the concurrency a registration gave
    handlers: Dict[Optional[str], Handler] = field(default_factory=dict)

    @property
    def concurrency(self) -> int:
        return self.given or 1

    def handler_for(self, step: Optional[str]) -> Optional[Handler]:
        return self.handlers.get(step) or self.handlers.get(None)


@dataclass(eq=False)
class _Slot:
    queue: str
    name: str
    thread: Optional[threading.Thread] = None
    conn: Optional[psycopg.Connection] = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: str = "idle"  # idle, claiming, running, stopped
    cancel_sent: bool = False
    job: Optional[Job] = None


class Worker:
    """Runs handlers on the jobs of their queues.

        worker = Worker("dbname=app", versions=["v2"])

        @worker.handler("emails", concurrency=4)
        def send(job):
            ...
            return {"sent": True}     # wf_complete's result

        worker.run()                  # until SIGTERM or SIGINT

    `conninfo` and `connect_kwargs` go to psycopg.connect (or give `connect`, a
    function returning a new connection). `name` names the worker in wf.jobs
    (default host:pid). `versions`: claim only jobs of these versions. `lease`:
    the claims' lease (else the queue's or wf.default_lease). `claim_wait`: how
    long one waiting claim blocks in the server before it is repeated.
    `key_prefix`: the prefix of the idempotency keys derived from (queue, id).
    """

    def __init__(self, conninfo: str = "", *, name: Optional[str] = None,
                 versions: Union[str, Iterable[str], None] = None, lease: Optional[Interval] = None,
                 claim_wait: float = 10.0, heartbeat_every: float = 10.0,
                 shutdown_timeout: float = 30.0, shutdown_retry_in: Interval = 1.0,
                 key_prefix: str = "pg_wf", connect: Optional[Callable[[], psycopg.Connection]] = None,
                 **connect_kwargs: Any):
        self.conninfo = conninfo
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.versions = [versions] if isinstance(versions, str) else (
            list(versions) if versions is not None else None)
        self.lease = lease
        self.claim_wait = claim_wait
        self.heartbeat_every = heartbeat_every
        self.shutdown_timeout = shutdown_timeout
        self.shutdown_retry_in = shutdown_retry_in
        self.key_prefix = key_prefix
        self._connect_fn = connect
        self._connect_kwargs = connect_kwargs
        self._queues: Dict[str, _Queue] = {}
        self._slots: List[_Slot] = []
        self._control: Optional[psycopg.Connection] = None
        self._control_lock = threading.Lock()
        self._heartbeats = _Heartbeats(self)
        self._stop_requested = threading.Event()
        self._force = threading.Event()
        self._done = threading.Event()
        self._stop_reason = "stop() was called"
        self._supervisor: Optional[threading.Thread] = None

    # ----------------------------------------------------------- registration

    def handler(self, queue: str, *, step: Optional[str] = None,
                concurrency: Optional[int] = None) -> Callable[[Handler], Handler]:
        """Decorator: `fn(job)` runs the jobs of `queue` (only those of workflow step
        `step`, if given; a queue's handler without `step` takes the others). Its
        return value is the job's result. `concurrency`: jobs of the queue run at
        once by this worker (default 1)."""
        def register(fn: Handler) -> Handler:
            self.register(queue, fn, step=step, concurrency=concurrency)
            return fn
        return register

    def register(self, queue: str, fn: Handler, *, step: Optional[str] = None,
                 concurrency: Optional[int] = None) -> None:
        """`handler` without the decorator."""
        if self._supervisor is not None:
            raise RuntimeError("register handlers before the worker starts")
        q = self._queues.setdefault(queue, _Queue(queue))
        if step in q.handlers:
            raise ValueError(f"queue {queue!r} already has a handler"
                             + (f" for step {step!r}" if step else ""))
        if concurrency is not None:
            if concurrency < 1:
                raise ValueError("concurrency must be at least 1")
            if q.given is not None and q.given != concurrency:
                raise ValueError(f"queue {queue!r}: concurrency {q.given} was given before")
            q.given = concurrency
        q.handlers[step] = fn

    # -------------------------------------------------------------- lifecycle

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Starts the worker and blocks until it has shut down: after SIGTERM or
        SIGINT (handled here when called from the main thread, unless the
        process ignores the signal), or `stop()`."""
        previous = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored stays ignored
                    previous[signum] = signal.signal(signum, self._on_signal)
        try:
            self.start()
            while not self._done.wait(0.2):
                pass
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def start(self) -> "Worker":
        """Starts the slots, the heartbeats and the supervisor in background threads;
        returns at once. The control connection is opened here, so that a bad
        conninfo raises now."""
        if self._supervisor is not None:
            raise RuntimeError("the worker was started already")
        if not self._queues:
            raise RuntimeError("no handlers registered")
        with self._control_lock:
            self._control_conn()
        total = sum(q.concurrency for q in self._queues.values())
        for q in self._queues.values():
            for i in range(q.concurrency):
                name = self.name if total == 1 else f"{self.name}/{q.name}/{i + 1}"
                self._slots.append(_Slot(q.name, name))
        log.info("worker %s: %s", self.name, ", ".join(
            f"{q.name} x{q.concurrency}" for q in self._queues.values())
            + (f", versions {self.versions}" if self.versions else ""))
        self._heartbeats.start()
        for slot in self._slots:
            slot.thread = threading.Thread(target=self._slot_loop, args=(slot,), daemon=True,
                                           name=f"pg_wf {slot.name}")
            slot.thread.start()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True,
                                            name=f"pg_wf {self.name} supervisor")
        self._supervisor.start()
        return self

    def stop(self, *, force: bool = False) -> None:
        """Asks the worker to shut down (returns at once; `join` waits): no new
        claims, in-flight jobs get `shutdown_timeout` to finish, then are given
        back. `force`: give them back now."""
        if force:
            self._force.set()
        self._stop_requested.set()

    def join(self, timeout: Optional[float] = None) -> bool:
        """Waits until the worker has shut down; True if it has."""
        return self._done.wait(timeout)

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.join()

    @property
    def in_flight(self) -> List[Job]:
        """The jobs running now."""
        return [s.job for s in self._slots if s.job is not None]

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Runs in the main thread, between bytecodes: only set flags here.
        if self._stop_requested.is_set():
            self._force.set()
        else:
            self._stop_reason = f"received {signal.Signals(signum).name}"
            self._stop_requested.set()

    # ------------------------------------------------------------- connections

    def _connect(self, application_name: str) -> psycopg.Connection:
        if self._connect_fn is not None:
            conn = self._connect_fn()
            conn.autocommit = True
            return conn
        kwargs = dict(self._connect_kwargs)
        if "application_name" not in kwargs and \
                "application_name" not in conninfo_to_dict(self.conninfo):
            kwargs["application_name"] = application_name[:63]
        return psycopg.connect(self.conninfo, autocommit=True, **kwargs)

    def _control_conn(self) -> psycopg.Connection:
        """The control connection (call with _control_lock held)."""
        if self._control is None or self._control.closed or self._control.broken:
            if self._control is not None:
                self._control.close()
            self._control = self._connect(f"pg_wf {self.name} control")
            # A heartbeat must not hang behind a handler's long transaction.
            self._control.execute("SET lock_timeout = '2s'")
        return self._control

    def _control_call(self, job: Job, function: str, *args: tuple) -> Any:
        with self._control_lock:
            conn = self._control_conn()
            try:
                return job._call(conn, function, *args)
            except psycopg.OperationalError:
                if conn.broken:
                    conn.close()
                raise

    # ------------------------------------------------------------------ slots

    def _slot_loop(self, slot: _Slot) -> None:
        delay = 0.5
        try:
            while not self._stop_requested.is_set():
                if slot.conn is None or slot.conn.closed or slot.conn.broken:
                    try:
                        slot.conn = self._connect(f"pg_wf {slot.name}")
                        delay = 0.5
                    except psycopg.Error as e:
                        log.warning("%s: cannot connect (%s); trying again in %.1f s",
                                    slot.name, str(e).strip(), delay)
                        self._stop_requested.wait(delay)
                        delay = min(delay * 2, 10.0)
                        continue
                try:
                    row = self._claim(slot)
                    if row is not None:
                        self._execute(slot, row)
                except Exception:  # the library's own calls around a job; a job in
                    # flight is recovered when this session ends, so end it
                    log.exception("%s: unexpected error; reconnecting", slot.name)
                    slot.conn.close()
                    self._stop_requested.wait(1.0)
        finally:
            with slot.lock:
                slot.state = "stopped"
            if slot.conn is not None:
                slot.conn.close()

    def _claim(self, slot: _Slot) -> Optional[Dict[str, Any]]:
        expr, params = _sql.call("wf_claim", [
            (None, slot.queue, "text"), ("worker", slot.name, "text"),
            ("lease", self.lease, "interval"), ("wait", self.claim_wait, "interval"),
            ("versions", self.versions, "text[]")])
        with slot.lock:
            if self._stop_requested.is_set():
                return None
            slot.state = "claiming"
        row = None
        try:
            row = slot.conn.cursor(row_factory=dict_row).execute(
                f"SELECT {CLAIM_COLUMNS} FROM {expr}", params).fetchone()
        except psycopg.errors.QueryCanceled:
            if not self._stop_requested.is_set():
                log.warning("%s: a claim was cancelled", slot.name)
        except psycopg.OperationalError as e:
            if not self._stop_requested.is_set():
                log.warning("%s: claim failed (%s); reconnecting", slot.name, str(e).strip())
                self._stop_requested.wait(0.5)
            slot.conn.close()
        except psycopg.Error as e:  # e.g. no right to work the queue: do not spin
            log.error("%s: claim failed: %s", slot.name, str(e).strip())
            self._stop_requested.wait(5.0)
        finally:
            with slot.lock:
                slot.state = "running" if row is not None else "idle"
                cancelled, slot.cancel_sent = slot.cancel_sent, False
        if cancelled and row is not None:
            # The stop's cancel may reach the server after the claim returned:
            # let it land on a statement of ours, not on the handler's.
            try:
                slot.conn.execute("SELECT 1")
            except psycopg.errors.QueryCanceled:
                pass
        return row

    def _execute(self, slot: _Slot, row: Dict[str, Any]) -> None:
        job = Job(self, slot.conn, row, slot.name)
        period = self.heartbeat_every
        if job.lease_expires_at is not None:  # a third of the lease, by the server's clock
            left = float(slot.conn.execute(
                "SELECT extract(epoch FROM %s::timestamptz - clock_timestamp())",
                (job.lease_expires_at,)).fetchone()[0])
            period = max(0.05, min(period, left / 3))
        handler = self._queues[job.queue].handler_for(job.step)
        jlog.debug("%s: claimed by %s", job, slot.name)
        slot.job = job
        self._heartbeats.add(job, period)
        try:
            if handler is None:
                raise LookupError(f"worker {self.name} has no handler for step {job.step!r}"
                                  f" of queue {job.queue!r}")
            result = handler(job)
            if job._finished is None:
                if job.conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    jlog.warning("%s: the handler left a transaction open; rolled back", job)
                    job.conn.rollback()
                job.complete(result)
            elif result is not None and job._finished == "completed":
                jlog.debug("%s: completed by the handler; its return value is not used", job)
            elif job._finished == "stale":
                # Refused (a cancel was requested, or the token went stale) inside
                # job.transaction(): the block rolled back, so an attempt that is
                # still this session's (a cancel request) must still end, or it
                # stays running while the session lives.
                self._end_lost(job, "wf_complete was refused")
        except Suspended as s:
            jlog.info("%s: parked (%s)", job, s)
        except JobLost as e:
            if job._finished not in ("stale", "failed"):  # logged already
                jlog.warning("%s: no longer this worker's (%s); dropped", job, e.reason)
                self._end_lost(job, e.reason)
        except BaseException as e:  # noqa: B902 - the handler's failure, whatever it is
            if job._finished == "completed":
                jlog.error("%s: the handler raised after completing the job: %s", job,
                          format_error(e, max_frames=0))
            else:
                self._fail(job, e)
        finally:
            self._heartbeats.remove(job)
            slot.job = None

    def _fail(self, job: Job, error: BaseException) -> None:
        message = format_error(error)
        permanent = isinstance(error, PermanentError)
        retry_in = getattr(error, "retry_in", None)
        args = [(None, message, "text"), ("retry_in", retry_in, "interval"),
                ("permanent", True if permanent else None, "boolean")]
        status = None
        try:
            conn = job.conn
            if conn.closed or conn.broken:
                raise psycopg.OperationalError("the job's connection is gone")
            if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.rollback()
            status = job._call(conn, "wf_fail", *args)
        except psycopg.Error:
            try:  # its session is gone: the reaper recovers the job, or we fail it first
                status = self._control_call(job, "wf_fail", *args)
            except psycopg.Error as e:
                jlog.error("%s: wf_fail failed (%s); the job is recovered when its session ends",
                          job, str(e).strip())
                return
        job._finished = "failed"
        first_line = message.split("\n", 1)[0]
        if status is None:
            self._log_stale(job, "wf_fail")
        elif status == "cancelled":
            jlog.info("%s: %s; it ends cancelled (a cancel was requested)", job, first_line)
        elif status == "failed":
            jlog.warning("%s failed for good%s: %s", job,
                        " (PermanentError)" if permanent else f" after {job.attempt} attempts",
                        first_line)
        else:
            jlog.info("%s failed: %s; wf_fail -> %s, retried later", job, first_line, status)
        jlog.debug("%s: %s", job, message)

    def _end_lost(self, job: Job, reason: str) -> None:
        """Ends an attempt the handler gave up on: a job whose cancel was requested
        still holds its token and ends `cancelled` only when its attempt ends."""
        try:
            status = self._control_call(job, "wf_fail", (f"stopped: {reason}", "text"))
        except psycopg.Error as e:
            jlog.debug("%s: wf_fail after the loss: %s", job, str(e).strip())
            return
        job._finished = "failed"
        if status is not None:
            jlog.info("%s: its attempt ended (wf_fail -> %s)", job, status)

    def _log_stale(self, job: Job, function: str) -> None:
        jlog.warning("%s: %s refused a stale token (the job was cancelled, reclaimed, or given"
                    " back); nothing recorded", job, function)

    # ------------------------------------------------------------- heartbeats

    def _heartbeat(self, job: Job) -> bool:
        """One heartbeat; False if the job is no longer ours (it is marked lost)."""
        if job.lost:
            return False
        if job._finished is not None:
            return True
        try:
            ok = self._control_call(job, "wf_heartbeat")
        except psycopg.errors.LockNotAvailable:  # its completion holds the claim row now
            jlog.debug("%s: heartbeat waited for a lock; trying again", job)
            return True
        except psycopg.Error as e:
            jlog.warning("%s: heartbeat failed (%s); trying again", job, str(e).strip())
            return True
        if not ok and job._finished is None:
            job._mark_lost("a heartbeat found it cancelled, reclaimed or past its max_run_time")
            jlog.warning("%s: %s; the handler should stop", job, job._lost_reason)
            return False
        return True

    # -------------------------------------------------------------- shutdown

    def _supervise(self) -> None:
        self._stop_requested.wait()
        busy = [s for s in self._slots if s.job is not None]
        log.info("worker %s: %s; no new claims, %d job(s) in flight get %.0f s to finish",
                 self.name, self._stop_reason, len(busy), self.shutdown_timeout)
        for slot in self._slots:
            with slot.lock:
                if slot.state == "claiming" and slot.conn is not None:
                    try:
                        slot.conn.cancel()
                        slot.cancel_sent = True
                    except psycopg.Error:
                        pass
        deadline = time.monotonic() + self.shutdown_timeout
        for slot in self._slots:
            while slot.thread.is_alive() and time.monotonic() < deadline and not self._force.is_set():
                slot.thread.join(0.05)
        for slot in self._slots:
            job = slot.job
            if slot.thread.is_alive() and job is not None and job._finished is None:
                self._give_back(slot, job)
        self._heartbeats.stop()
        with self._control_lock:
            if self._control is not None:
                self._control.close()
        log.info("worker %s: stopped", self.name)
        self._done.set()

    def _give_back(self, slot: _Slot, job: Job) -> None:
        reason = (f"worker {self.name} shut down: the job was given back after"
                  f" {self.shutdown_timeout:g} s" if not self._force.is_set()
                  else f"worker {self.name} shut down at once: the job was given back")
        job._mark_lost("given back at shutdown")
        try:
            status = self._control_call(job, "wf_fail", (reason, "text"),
                                        ("retry_in", self.shutdown_retry_in, "interval"))
        except psycopg.Error as e:
            jlog.error("%s: could not give it back (%s); it is recovered when this process ends",
                      job, str(e).strip())
            return
        jlog.warning("%s: still running at shutdown, given back (wf_fail -> %s)", job, status)
        try:  # stop a statement the handler may be waiting on
            slot.conn.cancel()
        except psycopg.Error:
            pass


class _Heartbeats(threading.Thread):
    """Heartbeats every job in flight, each at its own period."""

    def __init__(self, worker: Worker):
        super().__init__(daemon=True, name=f"pg_wf {worker.name} heartbeats")
        self.worker = worker
        self.cond = threading.Condition()
        self.due: Dict[Job, List[float]] = {}
        self.stopping = False

    def add(self, job: Job, period: float) -> None:
        with self.cond:
            self.due[job] = [time.monotonic() + period, period]
            self.cond.notify()

    def remove(self, job: Job) -> None:
        with self.cond:
            self.due.pop(job, None)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()

    def run(self) -> None:
        while True:
            with self.cond:
                if self.stopping:
                    return
                now = time.monotonic()
                ready = [job for job, (at, _) in self.due.items() if at <= now]
                if not ready:
                    nxt = min((at for at, _ in self.due.values()), default=now + 1.0)
                    self.cond.wait(max(0.01, nxt - now))
                    continue
                for job in ready:
                    self.due[job][0] = now + self.due[job][1]
            for job in ready:
                try:
                    self.worker._heartbeat(job)
                except Exception:
                    jlog.exception("%s: heartbeat", job)
