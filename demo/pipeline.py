#!/usr/bin/python3
"""pg_wf demo: a document pipeline run by workers of the pg_wf Python library.

Thirty documents each go summarize -> translate -> verify: three jobs per
document, each depending on the one before and reading its result from
`inputs`. A pool of worker processes, each a pg_wf.Worker (clients/python:
wf_claim with wait, the handler, wf_complete or wf_fail, heartbeats in the
background), runs them; the steps are slow (0.1-1.5 s) and sometimes fail.
Midway one worker is killed with SIGKILL while it holds a job, and the reaper
gives that job to another. At the end the script checks that every step of
every document ran to completion exactly once, with exactly one side effect,
and stops the workers with SIGTERM (a graceful shutdown).

Connects like any libpq client (PGHOST, PGPORT, PGDATABASE, PGUSER); the
database needs pg_wf, preloaded for the reaper. scripts/demo.sh sets it all up.
"""
import logging
import multiprocessing
import os
import random
import signal
import sys
import time
import uuid

import psycopg
from psycopg.types.json import Jsonb

# The library from this repository (elsewhere: pip install clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import pg_wf  # noqa: E402

QUEUE = "docs"
WORKERS = 4
DOCUMENTS = 30
FLAKY = 0.07  # chance that a step fails on its first attempt


class UpstreamError(Exception):
    """A transient failure of the service a step calls; worth a retry."""


# ---------------------------------------------------------------- the worker
# This is the whole client side: a pg_wf.Worker whose one handler runs each step.
# It claims (waiting in the server, no polling), runs the step while it
# heartbeats in the background, and completes the job together with the
# step's side effect, or fails it (the library turns the exception into
# wf_fail with the message and a short traceback: retried with backoff).

def run_step(job):
    result = STEPS[job.step](job, job.payload, job.inputs)
    # The side effect commits with the completion or not at all, and
    # wf_complete refuses a stale (queue, id, attempt): exactly once. A stale
    # token rolls the insert back (the library logs it).
    with job.transaction() as tx:
        tx.execute("INSERT INTO demo.outputs (document, step, attempt, worker, content)"
                   " VALUES (%s, %s, %s, %s, %s)",
                   (job.payload["doc"], job.step, job.attempt, job.worker_name,
                    Jsonb(result)))
        job.complete(result)


# ---------------------------------------------------------------- the steps
# Stand-ins for calls to a model or an API: slow, sometimes failing.

GLOSSARY = {"the": "le", "a": "un", "of": "de", "and": "et", "in": "dans", "for": "pour",
            "report": "rapport", "new": "nouveau", "city": "ville", "water": "eau",
            "energy": "énergie", "costs": "coûts", "year": "année", "study": "étude",
            "shows": "montre", "cut": "réduire", "could": "pourrait", "by": "de"}


def summarize(job, payload, inputs):
    slow_call(job)
    first = payload["text"].split(". ")[0].rstrip(".") + "."
    return {"doc": payload["doc"], "summary": first, "words": len(payload["text"].split())}


def translate(job, payload, inputs):
    summary = inputs["summarize"]["summary"]  # the result of the step before
    slow_call(job)
    words = [GLOSSARY.get(w.lower(), w) for w in summary.split()]
    return {"doc": inputs["summarize"]["doc"], "lang": "fr", "text": " ".join(words)}


def verify(job, payload, inputs):
    translation = inputs["translate"]
    slow_call(job)
    ok = translation["doc"] == payload["doc"] and len(translation["text"]) > 0
    return {"doc": payload["doc"], "ok": ok, "chars": len(translation["text"])}


STEPS = {"summarize": summarize, "translate": translate, "verify": verify}


def slow_call(job):
    """0.1-1.5 s of waiting on someone else's service, while the Worker
    heartbeats the job every 0.25 s. Publishes what it is doing so that the
    demo can pick a busy worker to kill."""
    seconds = random.uniform(0.1, 1.5)
    fails = job.attempt == 1 and random.random() < FLAKY
    if fails:
        seconds *= random.uniform(0.2, 0.8)
    start = time.monotonic()
    BOARD[SLOT * 4:SLOT * 4 + 4] = [job.id, job.attempt, start, start + seconds]
    try:
        while (left := start + seconds - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
            if job.lost:  # a heartbeat found it reclaimed or cancelled: stop
                raise pg_wf.JobLost("the job is no longer ours", job)
    finally:
        BOARD[SLOT * 4:SLOT * 4 + 4] = [0, 0, 0, 0]
    if fails:
        raise UpstreamError("503 from the model API: overloaded")


# ---------------------------------------------------------------- the demo

T0 = time.monotonic()  # replaced in workers by the parent's start
BOARD = None
SLOT = 0


def say(line):
    print(f"{time.monotonic() - T0:5.1f}s  {line}", flush=True)


class Narrator(logging.Handler):
    """Prints the library's log records of each job as demo lines."""

    def emit(self, record):
        say(f"{record.processName}: {record.getMessage()}")


def worker_process(name, slot, board, ready, t0):
    global BOARD, SLOT, T0
    BOARD, SLOT, T0 = board, slot, t0
    logging.getLogger("pg_wf").addHandler(Narrator())
    logging.getLogger("pg_wf").setLevel(logging.INFO)
    logging.getLogger("pg_wf.worker").setLevel(logging.WARNING)  # start and stop lines
    # Connects like any libpq client (PGHOST, ...); one connection per job in
    # flight (one here) and one for the heartbeats.
    worker = pg_wf.Worker(name=name, claim_wait=2, heartbeat_every=0.25, shutdown_timeout=5)
    worker.register(QUEUE, run_step)  # every step of the queue; run_step dispatches
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops us (SIGTERM)
    ready.wait(timeout=30)
    worker.run()  # until SIGTERM (the parent's, at the end, or on Ctrl-C)


def setup(conn):
    if conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()[0]:
        sys.exit(f"queue {QUEUE!r} already has jobs: run the demo on a fresh database")
    conn.execute("CREATE SCHEMA IF NOT EXISTS demo")
    conn.execute("DROP TABLE IF EXISTS demo.outputs")
    # The side effect of each step. UNIQUE: a second write would be an error.
    conn.execute("""CREATE TABLE demo.outputs (
                        document int NOT NULL, step text NOT NULL, attempt int NOT NULL,
                        worker text NOT NULL, content jsonb NOT NULL,
                        written_at timestamptz NOT NULL DEFAULT now(),
                        UNIQUE (document, step))""")
    pg_wf.configure_queue(conn, QUEUE, max_attempts=5, backoff_base="200 ms", backoff_max="2 s")


TOPICS = ["solar storage", "river water quality", "night buses", "school meals", "heat pumps",
          "bike lanes", "flood barriers", "library hours", "street lighting", "recycling"]


def document(n):
    topic = TOPICS[n % len(TOPICS)]
    return {"doc": n, "title": f"Report {n}: {topic}",
            "text": f"The new report on {topic} shows the city could cut costs by {5 + n % 20} percent. "
                    f"It was written in year {2015 + n % 10}. Next steps follow in a study for the council."}


def enqueue(conn):
    start = time.monotonic()
    with conn.transaction():  # the library's calls join the caller's transaction
        for n in range(1, DOCUMENTS + 1):
            wf = uuid.uuid4()
            previous = None
            for step in ("summarize", "translate", "verify"):
                previous = pg_wf.enqueue(conn, QUEUE, document(n) if step == "summarize" else {"doc": n},
                                         workflow_id=wf, step_name=step,
                                         depends_on=[previous] if previous else None,
                                         idempotency_key=f"doc-{n}-{step}")
    say(f"enqueued {DOCUMENTS * 3} jobs for {DOCUMENTS} documents in one transaction"
        f" ({(time.monotonic() - start) * 1000:.0f} ms); translate and verify start blocked")


def stats(conn):
    return conn.execute("SELECT blocked, pending, running, done, failed, cancelled"
                        "  FROM wf.queue_stats WHERE queue = %s", (QUEUE,)).fetchone()


class Kill:
    """Kills one worker in the middle of a slow step, then follows its job."""

    def __init__(self):
        self.job = None      # (id, attempt) held by the killed worker
        self.at = None       # database clock at the kill
        self.reported = False
        self.recovered_ms = self.running_ms = None
        self.ahead = 0

    def maybe_kill(self, conn, procs, board):
        now = time.monotonic()
        busy = [(board[s * 4 + 3] - now, s) for s in range(len(procs))
                if board[s * 4] and board[s * 4 + 3] - now > 0.6]
        if not busy:
            return
        left, slot = max(busy)
        job_id, attempt = int(board[slot * 4]), int(board[slot * 4 + 1])
        step, doc = conn.execute("SELECT step_name, payload->>'doc' FROM wf.jobs"
                                 " WHERE queue = %s AND id = %s", (QUEUE, job_id)).fetchone()
        self.at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        os.kill(procs[slot].pid, signal.SIGKILL)
        self.job = (job_id, attempt)
        say(f">> SIGKILL w{slot + 1} (pid {procs[slot].pid}) in the middle of {step} of doc {doc}"
            f" (job {job_id}, attempt {attempt}, {left:.1f} s of the step left)")

    def follow(self, conn):
        if self.job is None or self.reported:
            return
        job_id, attempt = self.job
        row = conn.execute(
            "SELECT status, attempt, worker, last_error,"
            "       extract(epoch FROM clock_timestamp() - %s) * 1000,"
            "       extract(epoch FROM started_at - %s) * 1000"
            "  FROM wf.jobs WHERE queue = %s AND id = %s",
            (self.at, self.at, QUEUE, job_id)).fetchone()
        status, now_attempt, worker, last_error, recovered_ms, started_ms = row
        # Watched every 50 ms: the first look that finds it recovered bounds
        # the recovery time (the next claim sets started_at and attempt).
        if self.recovered_ms is None and (status != "running" or now_attempt > attempt):
            self.recovered_ms = recovered_ms
            # Back in line: the ready jobs before it go first.
            self.ahead = conn.execute(
                "SELECT count(*) FROM wf.jobs WHERE queue = %s AND status = 'pending'"
                "   AND (run_at, id) < (SELECT run_at, id FROM wf.jobs WHERE queue = %s AND id = %s)",
                (QUEUE, QUEUE, job_id)).fetchone()[0] if status == "pending" else 0
            say(f">> reaper: job {job_id} back to pending within {recovered_ms:.0f} ms of the kill,"
                f" {self.ahead} ready jobs ahead of it ({last_error})")
        if now_attempt == attempt + 1 and status != "pending":
            self.running_ms = started_ms
            say(f">> job {job_id} running again {started_ms:.0f} ms after the kill, on {worker}"
                f" (attempt {now_attempt})")
            # The dead worker's token is stale now: a zombie could not write.
            hb = conn.execute("SELECT wf_heartbeat(%s, %s, %s)", (QUEUE, job_id, attempt)).fetchone()[0]
            ok = conn.execute("SELECT wf_complete(%s, %s, %s, '{\"zombie\": true}')",
                              (QUEUE, job_id, attempt)).fetchone()[0]
            say(f">> the lost token ({QUEUE}, {job_id}, {attempt}) is fenced off:"
                f" wf_heartbeat -> {str(hb).lower()}, wf_complete -> {str(ok).lower()}")
            self.reported = True
        elif now_attempt > attempt + 1:
            self.reported = True


def check(conn):
    ok = True

    def report(passed, text):
        nonlocal ok
        ok &= passed
        print(f"  {'ok  ' if passed else 'FAIL'}  {text}", flush=True)

    groups, exactly_one = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE done = 1) FROM ("
        "  SELECT payload->>'doc', step_name, count(*) FILTER (WHERE status = 'done') AS done"
        "    FROM wf.jobs WHERE queue = %s GROUP BY 1, 2) AS per_step", (QUEUE,)).fetchone()
    report(groups == DOCUMENTS * 3 and exactly_one == groups,
           f"every document has exactly one done job per step ({exactly_one} of {DOCUMENTS} x 3)")
    rows, pairs, fenced = conn.execute(
        "SELECT count(*), count(DISTINCT (o.document, o.step)),"
        "       count(*) FILTER (WHERE j.attempt = o.attempt AND j.status = 'done')"
        "  FROM demo.outputs o LEFT JOIN wf.jobs j"
        "    ON j.queue = %s AND j.step_name = o.step AND (j.payload->>'doc')::int = o.document",
        (QUEUE,)).fetchone()
    report(rows == pairs == fenced == DOCUMENTS * 3,
           f"demo.outputs: exactly one row per document and step ({rows} rows), each written"
           f" by the attempt that completed the job")
    verified = conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s AND step_name = 'verify'"
                            "   AND (result->>'ok')::boolean", (QUEUE,)).fetchone()[0]
    report(verified == DOCUMENTS,
           f"every verify step found its document's translation in `inputs` ({verified})")
    retries, lost = conn.execute(
        "SELECT sum(attempt - 1), count(*) FILTER (WHERE last_error LIKE 'worker lost%%')"
        "  FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()
    report(lost >= 1, f"{lost} job(s) recovered from the killed worker, {retries} retries in all,"
                      f" no job failed for good")
    return ok


def main():
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(WORKERS + 1)  # all workers started
    board = ctx.Array("d", WORKERS * 4)  # per worker: job id, attempt, step start, step end
    with psycopg.connect(autocommit=True, application_name="pg_wf demo") as conn:
        setup(conn)
        procs = [ctx.Process(target=worker_process, args=(f"w{i + 1}", i, board, ready, T0),
                             name=f"w{i + 1}") for i in range(WORKERS)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=30)
            say(f"started {WORKERS} workers (pids {', '.join(str(p.pid) for p in procs)}), each a"
                f" pg_wf.Worker: wf_claim(wait => '2 s') -> handler -> wf_complete | wf_fail")
            time.sleep(0.3)  # let them reach their first wf_claim: the enqueue wakes them
            enqueue(conn)
            return run(conn, procs, board)
        finally:  # done, Ctrl-C or an error: SIGTERM, each worker shuts down gracefully
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
                    p.join()


def run(conn, procs, board):
    """Progress lines until every job has finished; the kill on the way."""
    kill = Kill()
    next_line = time.monotonic()
    last_change, last_finished, warned = time.monotonic(), -1, False
    while True:
        blocked, pending, running, done, failed, cancelled = stats(conn)
        finished = blocked + pending + running == 0
        if time.monotonic() >= next_line or finished:
            say(f"blocked {blocked:2}  pending {pending:2}  running {running}"
                f"  done {done:2}  failed {failed}  cancelled {cancelled}")
            next_line += 0.5
        if finished:
            break
        alive = sum(p.is_alive() for p in procs)
        if running > alive and kill.job is None and not warned:
            warned = True
            say(f"!! {running} jobs running but only {alive} workers, each claiming one at a time")
        if kill.job is None and done >= DOCUMENTS * 3 * 0.35:
            kill.maybe_kill(conn, procs, board)
        kill.follow(conn)
        if done + failed + cancelled != last_finished:
            last_change, last_finished = time.monotonic(), done + failed + cancelled
        elif time.monotonic() - last_change > 15:
            say("!! giving up: no job finished for 15 s")
            return 1
        time.sleep(0.05)
    say(f"pipeline finished in {time.monotonic() - T0:.1f} s with"
        f" {sum(p.is_alive() for p in procs)} workers left; stopping them (SIGTERM)")
    print("checks:", flush=True)
    return 0 if check(conn) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
