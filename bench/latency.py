#!/usr/bin/python3
"""Commit-to-wake latency of a waiting claimer.

One claimer session waits for work; one enqueuer commits one job at a time.
The claimer reads the clock as soon as its claim statement returns the job,
inside a transaction that it commits right after (with the job's completion),
so its own durable commit is not counted. Two figures per job:

  latency       from the enqueuer's COMMIT returning to the claim returning:
                the wake-up itself. It can be slightly negative: the claimer
                is woken by the committing backend before the enqueuer's
                client has read the COMMIT's reply.
  incl. commit  from just before the enqueuer's COMMIT: adds the enqueuer's
                own durable commit (an fsync) to the above.

The next job is enqueued only after the previous one was claimed and a few
milliseconds have passed, so each commit finds the claimer asleep.

  --mode wf    claimer: SELECT ... FROM wf_claim(q, wait => '5s') in a loop
  --mode base  claimer: LISTEN; SKIP LOCKED claim; if empty, sleep on the
               socket until a NOTIFY; enqueuer: INSERT + NOTIFY in one
               transaction

Prints one JSON object: {"p50_ms", "p99_ms", "mean_ms", "max_ms",
"p50_incl_commit_ms", "p99_incl_commit_ms", "jobs", "timeouts",
"commit_p50_ms"}; the last is how long the enqueuer's COMMIT itself took.
"""
import argparse
import json
import multiprocessing as mp
import random
import select
import statistics
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

CHANNEL = "bench_wake"

BASE_CLAIM = """
UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
 WHERE id = (SELECT id FROM baseline_jobs
              WHERE status = 'pending' AND queue = %s AND run_at <= now()
              ORDER BY priority DESC, run_at, id
              FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id, attempts, payload"""


def claimer_wf(dsn, queue, jobs, pipe):
    timeouts = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        pipe.send("ready")
        got = 0
        while got < jobs:
            conn.execute("BEGIN")
            row = conn.execute(
                "SELECT id, attempt, payload FROM wf_claim(%s, wait => '5s')", (queue,)
            ).fetchone()
            t1 = time.monotonic_ns()
            if row is None:
                conn.execute("COMMIT")
                timeouts += 1
                continue
            conn.execute("SELECT wf_complete(%s, %s, %s)", (queue, row[0], row[1]))
            conn.execute("COMMIT")
            pipe.send((row[0], t1))
            got += 1
    pipe.send(("timeouts", timeouts))


def claimer_base(dsn, queue, jobs, pipe):
    timeouts = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        notified = [False]
        # Notifies that arrive while a query runs are handed to this handler;
        # one that arrives after an empty claim's snapshot must not be lost.
        conn.add_notify_handler(lambda n: notified.__setitem__(0, True))
        conn.execute("LISTEN " + CHANNEL)
        pipe.send("ready")
        got = 0
        while got < jobs:
            notified[0] = False
            conn.execute("BEGIN")
            row = conn.execute(BASE_CLAIM, (queue,)).fetchone()
            t1 = time.monotonic_ns()
            if row is not None:
                conn.execute(
                    "UPDATE baseline_jobs SET status = 'done', finished_at = now() WHERE id = %s",
                    (row[0],),
                )
                conn.execute("COMMIT")
                pipe.send((row[0], t1))
                got += 1
                continue
            # Notifications are delivered between transactions.
            conn.execute("COMMIT")
            if notified[0]:
                continue
            pg = conn.pgconn
            ready, _, _ = select.select([conn.fileno()], [], [], 5.0)
            if not ready:
                timeouts += 1
                continue
            pg.consume_input()
            while pg.notifies() is not None:
                pass
    pipe.send(("timeouts", timeouts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--mode", choices=["wf", "base"], required=True)
    ap.add_argument("--queue", default="wake")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--pause-ms", type=float, default=3.0,
                    help="pause between a claim and the next enqueue")
    args = ap.parse_args()

    parent, child = mp.Pipe()
    target = claimer_wf if args.mode == "wf" else claimer_base
    proc = mp.Process(target=target, args=(args.dsn, args.queue, args.jobs, child), daemon=True)
    proc.start()
    if not parent.poll(30) or parent.recv() != "ready":
        sys.exit("latency: claimer did not start")

    latencies = []
    with_commit = []
    commits = []
    with psycopg.connect(args.dsn) as conn:
        for i in range(args.jobs):
            time.sleep(args.pause_ms / 1000.0 * random.uniform(0.7, 1.3))
            payload = Jsonb({"i": i})
            if args.mode == "wf":
                job = conn.execute("SELECT wf_enqueue(%s, %s)", (args.queue, payload)).fetchone()[0]
            else:
                job = conn.execute(
                    "INSERT INTO baseline_jobs (queue, payload) VALUES (%s, %s) RETURNING id",
                    (args.queue, payload),
                ).fetchone()[0]
                conn.execute("NOTIFY " + CHANNEL)
            t_before = time.monotonic_ns()
            conn.commit()
            t0 = time.monotonic_ns()
            commits.append((t0 - t_before) / 1e6)
            if not parent.poll(30):
                sys.exit(f"latency: job {job} was not claimed within 30 s")
            claimed, t1 = parent.recv()
            if claimed != job:
                sys.exit(f"latency: enqueued job {job} but the claimer got {claimed}")
            latencies.append((t1 - t0) / 1e6)
            with_commit.append((t1 - t_before) / 1e6)
    timeouts = parent.recv()[1] if parent.poll(10) else None
    proc.join(10)

    latencies.sort()
    with_commit.sort()
    def pct(p, values=latencies):
        return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]
    print(json.dumps({
        "jobs": len(latencies),
        "p50_ms": round(pct(50), 3),
        "p99_ms": round(pct(99), 3),
        "p50_incl_commit_ms": round(pct(50, with_commit), 3),
        "p99_incl_commit_ms": round(pct(99, with_commit), 3),
        "mean_ms": round(statistics.fmean(latencies), 3),
        "max_ms": round(latencies[-1], 3),
        "timeouts": timeouts,
        "commit_p50_ms": round(statistics.median(commits), 3),
    }))


if __name__ == "__main__":
    main()
