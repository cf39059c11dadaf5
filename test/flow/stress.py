#!/usr/bin/python3
"""The driver of test/t/022_flow_control.pl: claimers, producers, kills.

`run` (the stress): claimer processes (--claimers, each with --conns
connections, one thread per connection) claim from four queues with flow
control -- fc.rate (a queue rate limit), fc.krate (a per-key rate limit),
fc.kc (per-key concurrency), fc.ord (ordered groups) -- with small max_jobs,
some with wait =>, and end each job after a short random piece of work:
mostly wf_complete, some wf_complete_and_claim (completing the last job in
hand and claiming the next ones in one call), some wf_fail with a retry in
20 ms (attempts 1 and 2 only, so every job ends done).
Producer threads keep enqueueing while they run (into fc.ord also inside
open transactions that commit a few milliseconds later, racing each other on
the same keys). Every --kill-every seconds the driver SIGKILLs a claimer
process that holds jobs at that moment (a client killed mid-job) and starts
a replacement; the server's reaper gives the killed one's jobs back and
others finish them. A sampler records, every few milliseconds, which
attempts of fc.kc and fc.ord are running (the claims the server counts).
After --seconds the producers and kills stop; the claimers drain the queues
and are stopped (SIGTERM: each finishes the job in hand).

Everything the checks need is written by the server in the same transaction
as what it records (022_flow_control.pl creates the tables):
  flow_claim  one row per claimed attempt, inserted by the claim's own
              statement (a killed claimer's claims are there exactly when
              they committed): started_at is wf.claim.started_at (the claim
              asks for a lease of 1 hour, so it is lease_expires_at - 1 h),
              claimed_at the clock right after wf_claim returned, seen_at
              the clock of the claimer's next statement (after the commit);
  flow_end    one row per end of an attempt, inserted by its statement:
              kind ('complete' or 'fail'), outcome (what wf_complete returned,
              as text, or wf_fail's new status) and end_before, the clock
              just before the function ran;
  flow_kill   each kill: the claimer process and the time just before it;
  flow_sample the running attempts (fc.kc, fc.ord) of each sample, with the
              sample statement's time.

`fair`: enqueues --a-jobs jobs with key A, then --b-jobs with key B into the
fair queue fc.fair, runs --claimers connections claiming one job at a time
(and completing it) until every B job was claimed, and logs each claim in
fair_claim (seq, id, started_at) from the claim's statement.

The last line of stdout is a JSON report. Run with Debian's python
(psycopg 3): /usr/bin/python3 test/flow/stress.py run --dsn '...'.
`claimer` is the claimer process itself (started by `run`).
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback

import psycopg

QUEUES = ["fc.rate", "fc.krate", "fc.kc", "fc.ord"]
QUEUE_WEIGHTS = [1, 1, 2, 2]
KC_KEYS = ["kc%d" % i for i in range(10)]
# A skewed spread: the first keys get most jobs, so they queue up behind
# their limit.
KC_KEY_WEIGHTS = [8, 6, 4, 3, 2, 2, 1, 1, 1, 1]
ORD_KEYS = ["o%d" % i for i in range(10)]
KRATE_KEYS = ["r%d" % i for i in range(4)]

# The claim and its record, in one statement and one transaction. A lease of
# 1 hour makes lease_expires_at - 1 hour the claim's started_at (no queue
# here has a max_run_time, which could cut the lease short).
CLAIM_SQL = """
WITH c AS (SELECT * FROM wf_claim(%(q)s, worker => %(w)s, max_jobs => %(n)s::int,
                                  lease => interval '1 hour', wait => %(wait)s::interval))
INSERT INTO flow_claim (queue, id, attempt, started_at, claimed_at, claimer)
SELECT c.queue, c.id, c.attempt, c.lease_expires_at - interval '1 hour', clock_timestamp(), %(w)s
  FROM c
RETURNING seq, id, attempt"""

SEEN_SQL = "UPDATE flow_claim SET seen_at = clock_timestamp() WHERE seq = ANY(%s::bigint[])"

# How an attempt ends, and its record, in one statement: wf_complete (kind
# 'complete', outcome 'true' when the job ended done) or wf_fail with a
# short retry (kind 'fail', outcome the new status). end_before is the clock
# before the function ran (c reads t).
COMPLETE_SQL = """
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS t0),
     c AS MATERIALIZED (SELECT wf_complete(%(q)s, %(id)s::bigint, %(a)s::int)::text AS outcome
                          FROM t)
INSERT INTO flow_end (queue, id, attempt, kind, outcome, end_before, claimer)
SELECT %(q)s, %(id)s::bigint, %(a)s::int, 'complete', c.outcome, t.t0, %(w)s FROM t, c
RETURNING outcome"""

FAIL_SQL = """
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS t0),
     c AS MATERIALIZED (SELECT wf_fail(%(q)s, %(id)s::bigint, %(a)s::int, 'stress: fails once',
                                       retry_in => interval '20 ms') AS outcome FROM t)
INSERT INTO flow_end (queue, id, attempt, kind, outcome, end_before, claimer)
SELECT %(q)s, %(id)s::bigint, %(a)s::int, 'fail', c.outcome, t.t0, %(w)s FROM t, c
RETURNING outcome"""

# wf_complete_and_claim: the completion and the next claim in one statement
# and one transaction, each recorded as above (its result names t, so it
# runs after t0 is read).
COMPLETE_AND_CLAIM_SQL = """
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS t0),
     c AS MATERIALIZED (
       SELECT r.* FROM t, LATERAL wf_complete_and_claim(
                %(q)s, %(id)s::bigint, %(a)s::int, result => jsonb_build_object('t0', t.t0),
                worker => %(w)s, max_jobs => %(n)s::int, lease => interval '1 hour') r),
     e AS (INSERT INTO flow_end (queue, id, attempt, kind, outcome, end_before, claimer)
           SELECT %(q)s, %(id)s::bigint, %(a)s::int, 'complete',
                  (SELECT bool_or(completed) FROM c)::text, t.t0, %(w)s FROM t
           RETURNING outcome),
     n AS (INSERT INTO flow_claim (queue, id, attempt, started_at, claimed_at, claimer, via)
           SELECT c.queue, c.id, c.attempt, c.lease_expires_at - interval '1 hour',
                  clock_timestamp(), %(w)s, 'wf_complete_and_claim'
             FROM c WHERE c.id IS NOT NULL
           RETURNING seq, id, attempt)
SELECT e.outcome, n.seq, n.id, n.attempt FROM e LEFT JOIN n ON true"""

# The attempts the server counts as running (count_key_running's rule).
SAMPLE_SQL = """
INSERT INTO flow_sample (at, queue, id, attempt, key)
SELECT statement_timestamp(), c.queue, c.id, c.attempt, c.key
  FROM wf.claim c JOIN wf.job j ON j.queue = c.queue AND j.id = c.id
 WHERE c.queue IN ('fc.kc', 'fc.ord') AND j.status = 'pending' AND j.attempt + 1 = c.attempt"""


def read_end(f, n=3000):
    f.flush()
    f.seek(0)
    return f.read()[-n:]


def connect(dsn, name, autocommit=True):
    return psycopg.connect(dsn, autocommit=autocommit, application_name=name)


# ------------------------------------------------------------------ claimer

def claimer_main(args):
    """One claimer process: --conns threads, each on its own connection."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    failed = []
    parent = os.getppid()

    def orphaned():
        # The driver died without stopping us (a test timeout): stop too.
        while not stop.wait(0.5):
            if os.getppid() != parent:
                stop.set()
    threading.Thread(target=orphaned, daemon=True).start()

    def worker(conn_no):
        name = "%s/%d" % (args.name, conn_no)
        rng = random.Random("%s:%s" % (args.seed, name))
        try:
            with connect(args.dsn, "flow_" + name) as conn:
                conn.execute("SET statement_timeout = '30s'")
                held = []   # claimed jobs in hand: (seq, id, attempt)
                # Stops with no job in hand (a SIGTERM while it holds some
                # lets it finish them).
                while held or not stop.is_set():
                    if not held:
                        q = rng.choices(QUEUES, QUEUE_WEIGHTS)[0]
                        n = rng.choice([1, 1, 1, 2, 3])
                        wait = None
                        if rng.random() < 0.4:
                            wait = rng.choice(["50 ms", "200 ms"] if q in ("fc.kc", "fc.ord")
                                              else ["200 ms", "400 ms"])
                        held = conn.execute(CLAIM_SQL, {"q": q, "w": name, "n": n,
                                                        "wait": wait}).fetchall()
                        if not held:
                            if wait is None:
                                time.sleep(rng.uniform(0.003, 0.015))
                            continue
                    conn.execute(SEEN_SQL, [[r[0] for r in held]])
                    jobs, held = held, []
                    for i, (_, job_id, attempt) in enumerate(jobs):
                        time.sleep(rng.uniform(0.002, 0.025))   # the work
                        p = {"q": q, "id": job_id, "a": attempt, "w": name}
                        r = rng.random()
                        if r < 0.05 and attempt <= 2:
                            outcome = conn.execute(FAIL_SQL, p).fetchone()[0]
                            expected = "pending"
                        elif r < 0.3 and i == len(jobs) - 1 and not stop.is_set():
                            # The last job in hand: complete it and claim the
                            # next ones of the queue in one call.
                            p["n"] = rng.choice([1, 1, 2])
                            rows = conn.execute(COMPLETE_AND_CLAIM_SQL, p).fetchall()
                            outcome = rows[0][0]
                            held = [r[1:] for r in rows if r[1] is not None]
                            expected = "true"
                        else:
                            outcome = conn.execute(COMPLETE_SQL, p).fetchone()[0]
                            expected = "true"
                        if outcome != expected:
                            # A live claimer's token went stale: the check of
                            # flow_end says so; go on with the others.
                            print("claimer %s: ending %s/%d/%d gave %r" % (name, q, job_id,
                                                                         attempt, outcome),
                                  file=sys.stderr, flush=True)
        except Exception:
            failed.append(traceback.format_exc())
            stop.set()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(args.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in failed:
        print(f, file=sys.stderr, flush=True)
    sys.exit(3 if failed else 0)


# -------------------------------------------------------------------- run

class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.stop_producing = threading.Event()
        self.stop_sampling = threading.Event()
        self.lock = threading.Lock()
        self.enqueued = {q: 0 for q in QUEUES}
        self.errors = []
        self.procs = {}       # name -> (slot, Popen, its stderr file)
        self.generation = {}  # slot -> generation
        self.killed = []      # {claimer, at}
        self.samples = 0
        self.exits = {}       # name -> exit code, or "killed"

    def error(self, what):
        with self.lock:
            self.errors.append(what)

    def count(self, queue, n):
        with self.lock:
            self.enqueued[queue] += n

    # The first jobs, enough to keep each rate limit at its limit for the
    # whole run, and a backlog behind the per-key limits.
    def fill(self, conn):
        a = self.args
        secs = a.seconds + 1

        def batch(queue, keys):
            payloads = json.dumps([{"n": i} for i in range(len(keys))])
            n = conn.execute("SELECT count(*) FROM wf_enqueue_batch(%s, %s::jsonb, %s::text[])",
                             [queue, payloads, keys]).fetchone()[0]
            self.count(queue, n)

        batch("fc.rate", [None] * int(a.rate_limit * secs))
        batch("fc.krate", [k for k in KRATE_KEYS for _ in range(int(a.key_rate_limit * secs))])
        batch("fc.kc", self.rng.choices(KC_KEYS, KC_KEY_WEIGHTS, k=300))
        batch("fc.ord", [self.rng.choice(ORD_KEYS) for _ in range(200)])

    def producer(self, idx):
        """Keeps fc.kc and fc.ord busy; enqueues into fc.ord also inside
        open transactions, racing the other producer on the same keys, with
        priorities and some run_at a little ahead."""
        rng = random.Random("%s:producer%d" % (self.args.seed, idx))
        try:
            with connect(self.args.dsn, "flow_producer%d" % idx, autocommit=False) as conn:
                while not self.stop_producing.is_set():
                    r = rng.random()
                    if r < 0.4:
                        # Some with a priority (which must not reorder a
                        # group), some due a little later (which holds the
                        # jobs behind them in their group).
                        with conn.transaction():
                            conn.execute(
                                "SELECT wf_enqueue('fc.ord', '{}', priority => %s::int,"
                                " run_at => CASE WHEN %s THEN clock_timestamp() + interval '30 ms'"
                                " END, key => %s)",
                                [rng.choice([0, 0, 0, -3, 5]), rng.random() < 0.1,
                                 rng.choice(ORD_KEYS)])
                            time.sleep(rng.uniform(0, 0.008))
                        self.count("fc.ord", 1)
                    elif r < 0.55:
                        keys = [rng.choice(ORD_KEYS) for _ in range(rng.randint(2, 4))]
                        with conn.transaction():
                            n = conn.execute(
                                "SELECT count(*) FROM wf_enqueue_batch('fc.ord', %s::jsonb,"
                                " %s::text[])", [json.dumps([{}] * len(keys)), keys]).fetchone()[0]
                        self.count("fc.ord", n)
                    else:
                        keys = rng.choices(KC_KEYS, KC_KEY_WEIGHTS, k=rng.randint(1, 4))
                        with conn.transaction():
                            n = conn.execute(
                                "SELECT count(*) FROM wf_enqueue_batch('fc.kc', %s::jsonb,"
                                " %s::text[])", [json.dumps([{}] * len(keys)), keys]).fetchone()[0]
                        self.count("fc.kc", n)
                    time.sleep(rng.uniform(0.02, 0.06))
        except Exception:
            self.error("producer %d: %s" % (idx, traceback.format_exc()))

    def sampler(self):
        try:
            with connect(self.args.dsn, "flow_sampler") as conn:
                while not self.stop_sampling.is_set():
                    conn.execute(SAMPLE_SQL)
                    self.samples += 1
                    time.sleep(self.args.sample_every)
        except Exception:
            self.error("sampler: %s" % traceback.format_exc())

    def spawn(self, slot):
        g = self.generation.get(slot, 0) + 1
        self.generation[slot] = g
        name = "c%d.g%d" % (slot, g)
        cmd = ["/usr/bin/python3", os.path.abspath(__file__), "claimer", "--dsn", self.args.dsn,
               "--name", name, "--conns", str(self.args.conns), "--seed", str(self.args.seed)]
        # Its stderr (tracebacks, stale tokens) goes to a file: a pipe
        # nobody reads while it runs could fill up and stall it.
        err = open(os.path.join(self.args.log_dir, "flow_claimer_%s.err" % name), "w+")
        self.procs[name] = (slot, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err),
                            err)

    def kill_one(self, conn):
        """SIGKILLs a claimer process that holds a job it has seen (a client
        killed mid-job), and starts another in its slot."""
        live = [n for n, (_, p, _) in self.procs.items() if p.poll() is None]
        holding = conn.execute(
            "SELECT DISTINCT split_part(c.claimer, '/', 1) FROM flow_claim c"
            " WHERE c.seen_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM flow_end e"
            "   WHERE e.queue = c.queue AND e.id = c.id AND e.attempt = c.attempt)"
            "   AND split_part(c.claimer, '/', 1) = ANY(%s)", [live]).fetchall()
        if not holding:
            return
        name = self.rng.choice(sorted(h[0] for h in holding))
        slot, proc, _ = self.procs[name]
        at = time.time()   # the server's clock too: one machine
        proc.kill()
        proc.wait()
        self.exits[name] = "killed"
        conn.execute("INSERT INTO flow_kill (claimer, killed_at) VALUES (%s, to_timestamp(%s))",
                     [name, at])
        self.killed.append({"claimer": name, "at": at})
        self.spawn(slot)

    def run(self):
        a = self.args
        started = time.time()
        with connect(a.dsn, "flow_driver") as conn:
            self.fill(conn)
            for slot in range(a.claimers):
                self.spawn(slot)
            threads = [threading.Thread(target=self.producer, args=(i,), daemon=True)
                       for i in range(2)]
            sampler = threading.Thread(target=self.sampler, daemon=True)
            for t in threads + [sampler]:
                t.start()
            run_until = time.time() + a.seconds
            next_kill = time.time() + a.kill_every
            while time.time() < run_until:
                time.sleep(0.05)
                if a.kill_every > 0 and time.time() >= next_kill:
                    self.kill_one(conn)
                    next_kill = time.time() + self.rng.uniform(0.5, 1.5) * a.kill_every
                for name, (slot, p, err) in list(self.procs.items()):
                    if p.poll() is not None and name not in self.exits:
                        self.exits[name] = p.returncode
                        self.error("claimer %s exited early (%d): %s"
                                   % (name, p.returncode, read_end(err)))
            self.stop_producing.set()
            for t in threads:
                t.join()
            run_end = time.time()
            # Drain: every job of the run done.
            drain_until = time.time() + a.drain_timeout
            left = None
            while time.time() < drain_until:
                left = conn.execute("SELECT count(*) FROM wf.job WHERE queue LIKE 'fc.%%'"
                                    " AND queue <> 'fc.fair' AND status <> 'done'").fetchone()[0]
                if left == 0:
                    break
                time.sleep(0.2)
            drained = time.time()
            self.stop_sampling.set()
            sampler.join()
            for name, (_, p, _) in self.procs.items():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for name, (_, p, err) in self.procs.items():
                if name in self.exits:
                    continue
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    self.error("claimer %s did not stop after SIGTERM" % name)
                self.exits[name] = p.returncode
                text = read_end(err)
                if p.returncode != 0 or text:
                    self.error("claimer %s exited %d: %s" % (name, p.returncode, text))
        return {
            "seed": a.seed, "seconds": a.seconds, "claimers": a.claimers, "conns": a.conns,
            "claimer_processes": len(self.procs), "kills": len(self.killed),
            "enqueued": self.enqueued, "enqueued_total": sum(self.enqueued.values()),
            "samples": self.samples, "left_after_drain": left,
            "run_s": round(run_end - started, 1), "drain_s": round(drained - run_end, 1),
            "total_s": round(time.time() - started, 1), "errors": self.errors,
        }


# ------------------------------------------------------------------- fair

FAIR_CLAIM_SQL = """
WITH c AS (SELECT * FROM wf_claim('fc.fair', worker => %(w)s, max_jobs => 1,
                                  lease => interval '1 hour'))
INSERT INTO fair_claim (id, attempt, started_at, claimer)
SELECT c.id, c.attempt, c.lease_expires_at - interval '1 hour', %(w)s FROM c
RETURNING id, attempt"""


def fair_main(args):
    started = time.time()
    with connect(args.dsn, "flow_fair") as conn:
        t0 = time.time()
        n_a = conn.execute(
            "SELECT count(*) FROM wf_enqueue_batch('fc.fair',"
            " (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, %s) i),"
            " array_fill('A'::text, ARRAY[%s]))", [args.a_jobs, args.a_jobs]).fetchone()[0]
        t_a = time.time() - t0
        b_ids = {r[0] for r in conn.execute(
            "SELECT * FROM wf_enqueue_batch('fc.fair',"
            " (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, %s) i),"
            " array_fill('B'::text, ARRAY[%s]))", [args.b_jobs, args.b_jobs]).fetchall()}
    lock = threading.Lock()
    state = {"b_left": set(b_ids), "claims": 0, "errors": []}
    stop = threading.Event()

    def claimer(i):
        name = "fair%d" % i
        try:
            with connect(args.dsn, "flow_" + name) as c:
                while not stop.is_set():
                    rows = c.execute(FAIR_CLAIM_SQL, {"w": name}).fetchall()
                    for job_id, attempt in rows:
                        c.execute("SELECT wf_complete('fc.fair', %s::bigint, %s::int)",
                                  [job_id, attempt])
                    with lock:
                        state["claims"] += len(rows)
                        for job_id, _ in rows:
                            state["b_left"].discard(job_id)
                        if not state["b_left"] or state["claims"] >= args.max_claims:
                            stop.set()
        except Exception:
            with lock:
                state["errors"].append(traceback.format_exc())
            stop.set()

    t1 = time.time()
    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(args.claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"a_jobs": n_a, "b_jobs": len(b_ids), "enqueue_a_s": round(t_a, 2),
            "claims": state["claims"], "b_unclaimed": len(state["b_left"]),
            "claim_s": round(time.time() - t1, 2), "total_s": round(time.time() - started, 2),
            "errors": state["errors"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--dsn", required=True)
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--seconds", type=float, default=20)
    r.add_argument("--claimers", type=int, default=8)
    r.add_argument("--conns", type=int, default=3)
    r.add_argument("--kill-every", type=float, default=1.5)
    r.add_argument("--rate-limit", type=int, default=50)
    r.add_argument("--key-rate-limit", type=int, default=8)
    r.add_argument("--sample-every", type=float, default=0.01)
    r.add_argument("--drain-timeout", type=float, default=30)
    r.add_argument("--log-dir", default=".")
    c = sub.add_parser("claimer")
    c.add_argument("--dsn", required=True)
    c.add_argument("--name", required=True)
    c.add_argument("--conns", type=int, default=3)
    c.add_argument("--seed", type=int, default=0)
    f = sub.add_parser("fair")
    f.add_argument("--dsn", required=True)
    f.add_argument("--a-jobs", type=int, default=100000)
    f.add_argument("--b-jobs", type=int, default=100)
    f.add_argument("--claimers", type=int, default=8)
    f.add_argument("--max-claims", type=int, default=5000)
    args = ap.parse_args()
    if args.mode == "claimer":
        claimer_main(args)
    elif args.mode == "run":
        if args.seed is None:
            args.seed = random.SystemRandom().randrange(2**31)
        print("flow stress: seed %d, %g s, %d claimers x %d connections"
              % (args.seed, args.seconds, args.claimers, args.conns), flush=True)
        run = Run(args)
        try:
            report = run.run()
        finally:
            # However it ended, no claimer outlives the driver.
            for _, p, _ in run.procs.values():
                if p.poll() is None:
                    p.kill()
        print(json.dumps(report), flush=True)
    else:
        print(json.dumps(fair_main(args)), flush=True)


if __name__ == "__main__":
    main()
