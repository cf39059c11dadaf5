#!/usr/bin/python3
"""Time from SIGKILL of a client that holds claims to its jobs being claimable.

Each round: enqueue --jobs jobs; a child process (a separate client) claims
all of them and sleeps; the clock is read and the child gets SIGKILL; another
session then waits in wf_claim(wait => ...) until it has claimed every one of
those jobs again. Recovery = last job claimed again - SIGKILL sent. Nothing
polls: the reaper recovers the dead session's jobs and wakes waiting claimers.

Prints one JSON object: {"p50_ms", "max_ms", "rounds", "all_ms"}.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import psycopg


def child(dsn, queue, jobs):
    conn = psycopg.connect(dsn, autocommit=True)
    rows = conn.execute("SELECT id FROM wf_claim(%s, max_jobs => %s)", (queue, jobs)).fetchall()
    print(" ".join(str(r[0]) for r in rows), flush=True)
    time.sleep(3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--queue", default="kill")
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.dsn, args.queue, args.jobs)
        return

    results = []
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        for _ in range(args.rounds):
            conn.execute(
                "SELECT count(*) FROM wf_enqueue_batch(%s,"
                " (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, %s) g))",
                (args.queue, args.jobs),
            )
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--child", "--dsn", args.dsn,
                 "--queue", args.queue, "--jobs", str(args.jobs)],
                stdout=subprocess.PIPE, text=True,
            )
            held = set(int(x) for x in proc.stdout.readline().split())
            if len(held) != args.jobs:
                proc.kill()
                sys.exit(f"kill_recovery: the client claimed {len(held)} of {args.jobs} jobs")
            t0 = time.monotonic_ns()
            os.kill(proc.pid, signal.SIGKILL)
            back = set()
            deadline = time.monotonic() + 120
            while back != held:
                if time.monotonic() > deadline:
                    sys.exit(f"kill_recovery: only {len(back)} of {len(held)} jobs came back in 120 s")
                rows = conn.execute(
                    "SELECT id, attempt FROM wf_claim(%s, max_jobs => %s, wait => '1s')",
                    (args.queue, args.jobs),
                ).fetchall()
                t1 = time.monotonic_ns()
                for job, attempt in rows:
                    back.add(job)
                    conn.execute("SELECT wf_complete(%s, %s, %s)", (args.queue, job, attempt))
            proc.wait()
            results.append((t1 - t0) / 1e6)

    print(json.dumps({
        "rounds": len(results),
        "p50_ms": round(statistics.median(results), 1),
        "max_ms": round(max(results), 1),
        "all_ms": [round(r, 1) for r in results],
    }))


if __name__ == "__main__":
    main()
