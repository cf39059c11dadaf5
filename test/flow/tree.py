#!/usr/bin/python3
"""The worker of test/t/023_workflow_tree_crash.pl: a tree of workflows.

`submit` submits --roots root workflows and prints their ids (JSON). Each
root workflow (queue tree.root) has --root-steps steps p0, p1, ... and a
step `final` after them all. Every step's payload says what its worker does
(its "role"):

  spawn   starts one child workflow per name in "children" with
          wf_start_child (spec "spec"), one transaction each, then parks in
          wf_await_children. When it is claimed again with every child's
          outcome in its events ("wf:child:<name>"), it completes with
          {"n": <sum of the children's results' n>, "children": {<name>:
          {"workflow_id", "status", "n"}}}. A step re-run after a crash
          calls wf_start_child again with the same names: it must get the
          same children back.
  fanout  completes with wf_complete_with_steps, adding --parts steps
          part0.. (role spawn, after the completing step) and a step
          `gather` after all of them (role leaf).
  leaf    completes with {"n": 1 + the sum of its inputs' n}; "expect" names
          the inputs it must get.

The three levels: a root step p<i> spawns --children children (queue
tree.mid) of one step `plan` (fanout); each part<k> of a child spawns
--grandchildren grandchildren (queue tree.leaf): steps a and b, and z after
both (leaves). So a root's `final` result n is the number of leaf steps of
its whole tree.

`worker` is one worker process with one connection: it claims from the
three queues and runs what it claims, idempotently, the way a real worker
does. Every wf_complete / wf_complete_with_steps runs in one transaction
with its side effect (a row in tree_effect) and its record (tree_end). What
it does is recorded by the server in the same statement or transaction as
the call it records (023 creates the tables):
  tree_claim        every claim (the claim's own statement): the attempt,
                    its events and inputs, claimed_at (after wf_claim);
  tree_end          every successful end of an attempt: kind (complete,
                    fanout, await), what the call returned, end_before (the
                    clock before the call);
  tree_child_start  every wf_start_child call and the id it returned;
  tree_effect       the side effect of each completion.
It survives its connection dying (an administrator's terminate, a crash
restart, an immediate shutdown): it drops the job in hand (the reaper gives
it back) and connects again until it can. With --self-kill p it SIGKILLs
itself at chosen moments (after a claim, between two wf_start_child, after
wf_await_children, inside a completion's transaction) with probability p
each, and says so on stderr ("SELFKILL ..."); with --crash-spawns N it
certainly does so after the first wf_start_child of the first attempt of
N percent of the spawning steps (chosen by job id). Anything unexpected (an error
that is not the loss of its connection, a stale token while connected, a
child that did not end done, inputs other than expected) goes to stderr as
a line starting with "UNEXPECTED". SIGTERM: it finishes the job in hand and
exits 0.

Run with Debian's python (psycopg 3): /usr/bin/python3 test/flow/tree.py.
"""

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import traceback

import psycopg

QUEUES = ["tree.root", "tree.mid", "tree.leaf"]
CHILD_PREFIX = "wf:child:"

CLAIM_SQL = """
WITH c AS (SELECT * FROM wf_claim(%(q)s, worker => %(w)s, max_jobs => 1,
                                  wait => %(wait)s::interval))
INSERT INTO tree_claim (queue, id, attempt, workflow_id, step_name, payload, inputs, events,
                        worker, claimed_at)
SELECT c.queue, c.id, c.attempt, c.workflow_id, c.step_name, c.payload, c.inputs, c.events,
       %(w)s, clock_timestamp()
  FROM c
RETURNING queue, id, attempt, workflow_id, step_name, payload, inputs, events"""

# Each fenced call and its record in one statement: end_before is the clock
# before the call ran (the call reads t).
END_SQL = """
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS t0),
     c AS MATERIALIZED (SELECT (%s)::text AS outcome FROM t)
INSERT INTO tree_end (queue, id, attempt, kind, outcome, end_before, worker)
SELECT %%(q)s, %%(id)s::bigint, %%(a)s::int, %%(kind)s, c.outcome, t.t0, %%(w)s FROM t, c
RETURNING outcome"""

COMPLETE_SQL = END_SQL % "wf_complete(%(q)s, %(id)s::bigint, %(a)s::int, %(result)s::jsonb)"
FANOUT_SQL = END_SQL % ("wf_complete_with_steps(%(q)s, %(id)s::bigint, %(a)s::int,"
                        " %(result)s::jsonb, %(steps)s::jsonb)")
AWAIT_SQL = END_SQL % "wf_await_children(%(q)s, %(id)s::bigint, %(a)s::int)"

START_CHILD_SQL = """
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS t0),
     c AS MATERIALIZED (SELECT wf_start_child(%(q)s, %(id)s::bigint, %(a)s::int, %(name)s,
                                              %(spec)s::jsonb) AS child FROM t)
INSERT INTO tree_child_start (parent_queue, parent_id, attempt, name, workflow_id,
                              called_before, worker)
SELECT %(q)s, %(id)s::bigint, %(a)s::int, %(name)s, c.child, t.t0, %(w)s FROM t, c
RETURNING workflow_id"""

EFFECT_SQL = """
INSERT INTO tree_effect (queue, job_id, attempt, workflow_id, step_name, kind, inputs, result,
                         worker)
VALUES (%(q)s, %(id)s::bigint, %(a)s::int, %(wf)s::uuid, %(step)s, %(kind)s, %(inputs)s::jsonb,
        %(result)s::jsonb, %(w)s)"""


class Stale(Exception):
    pass


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ specs

def grandchild_spec():
    return {"name": "grandchild", "queue": "tree.leaf", "steps": [
        {"name": "a", "payload": {"role": "leaf", "expect": []}},
        {"name": "b", "payload": {"role": "leaf", "expect": []}},
        {"name": "z", "payload": {"role": "leaf", "expect": ["a", "b"]}, "after": ["a", "b"]},
    ]}


def child_spec(parts, grandchildren):
    return {"name": "child", "queue": "tree.mid", "steps": [
        {"name": "plan", "payload": {"role": "fanout", "parts": parts,
                                     "grandchildren": grandchildren}},
    ]}


def root_spec(k, root_steps, children, parts, grandchildren):
    names = ["p%d" % i for i in range(root_steps)]
    steps = [{"name": n, "payload": {"role": "spawn",
                                     "children": ["c%d" % j for j in range(children)],
                                     "spec": child_spec(parts, grandchildren)}}
             for n in names]
    steps.append({"name": "final", "payload": {"role": "leaf", "expect": names},
                  "after": names})
    return {"name": "tree%d" % k, "queue": "tree.root", "steps": steps}


def submit_main(args):
    with psycopg.connect(args.dsn, autocommit=True, application_name="tree_submit") as conn:
        ids = [str(conn.execute("SELECT wf_submit(%s::jsonb)", [json.dumps(
            root_spec(k, args.root_steps, args.children, args.parts, args.grandchildren))])
            .fetchone()[0]) for k in range(args.roots)]
    print(json.dumps({"roots": ids}), flush=True)


# ----------------------------------------------------------------- worker

class Worker:
    def __init__(self, args):
        self.args = args
        self.name = args.name
        self.rng = random.Random("%s:%s" % (args.seed, args.name))
        self.conn = None
        self.stop = threading.Event()
        self.down_since = None
        self.parent = os.getppid()

    def unexpected(self, what):
        log("UNEXPECTED %s: %s" % (self.name, what))

    def maybe_die(self, point, job, certainly=False):
        if certainly or self.rng.random() < self.args.self_kill:
            log("SELFKILL %s at %s of %s/%s/%s" % (self.name, point, job["queue"], job["id"],
                                                    job["attempt"]))
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10)

    def work(self, factor=1.0):
        ms = self.args.work_ms * factor
        time.sleep(self.rng.uniform(0.5, 1.5) * ms / 1000.0)

    # A connection is lost (and the job in hand with it) when it is broken
    # or the server said it is going away.
    def lost(self, e):
        state = getattr(getattr(e, "diag", None), "sqlstate", None) or ""
        return (self.conn is None or self.conn.broken or self.conn.closed
                or state.startswith("08") or state in ("57P01", "57P02", "57P03"))

    def connect(self):
        while not self.stop.is_set() and os.getppid() == self.parent:
            try:
                self.conn = psycopg.connect(self.args.dsn, autocommit=True,
                                            application_name=self.name, connect_timeout=5)
                if self.down_since is not None:
                    log("%s: connected again after %.1f s" % (self.name,
                                                              time.time() - self.down_since))
                    self.down_since = None
                return True
            except psycopg.OperationalError as e:
                if self.down_since is None:
                    self.down_since = time.time()
                    log("%s: cannot connect (%s), retrying" % (self.name,
                                                               str(e).strip().splitlines()[0]))
                time.sleep(0.1)
        return False

    def claim(self):
        order = list(QUEUES)
        self.rng.shuffle(order)
        for q in order:
            rows = self.conn.execute(CLAIM_SQL, {"q": q, "w": self.name, "wait": None}).fetchall()
            if rows:
                return rows[0]
        q = self.rng.choice(QUEUES)
        rows = self.conn.execute(CLAIM_SQL, {"q": q, "w": self.name,
                                             "wait": "100 milliseconds"}).fetchall()
        return rows[0] if rows else None

    def end(self, sql, params):
        outcome = self.conn.execute(sql, params).fetchone()[0]
        if outcome is None or outcome == "false":
            raise Stale("%s of %s/%s/%s returned %s" % (params["kind"], params["q"], params["id"],
                                                        params["a"], outcome))
        return outcome

    def complete(self, job, kind, result, steps=None):
        p = {"q": job["queue"], "id": job["id"], "a": job["attempt"], "w": self.name,
             "wf": str(job["workflow_id"]), "step": job["step_name"], "kind": kind,
             "inputs": None if job["inputs"] is None else json.dumps(job["inputs"]),
             "result": json.dumps(result)}
        with self.conn.transaction():
            self.conn.execute(EFFECT_SQL, p)
            self.maybe_die("the transaction of its completion", job)
            if steps is None:
                p["kind"] = "complete"
                self.end(COMPLETE_SQL, p)
            else:
                p["kind"] = "fanout"
                p["steps"] = json.dumps(steps)
                self.end(FANOUT_SQL, p)

    def run_leaf(self, job):
        inputs = job["inputs"] or {}
        expect = job["payload"].get("expect", [])
        if sorted(inputs.keys()) != sorted(expect):
            self.unexpected("job %s (%s) got inputs %s, expected %s"
                            % (job["id"], job["step_name"], sorted(inputs.keys()), expect))
        n = 1 + sum(int(v.get("n", 0)) for v in inputs.values() if isinstance(v, dict))
        self.work()
        self.complete(job, "leaf", {"n": n, "step": job["step_name"]})

    def run_fanout(self, job):
        pl = job["payload"]
        parts = ["part%d" % i for i in range(pl["parts"])]
        steps = [{"name": part, "queue": "tree.mid", "after": [job["step_name"]],
                  "payload": {"role": "spawn",
                              "children": ["g%d" % j for j in range(pl["grandchildren"])],
                              "spec": grandchild_spec()}}
                 for part in parts]
        steps.append({"name": "gather", "queue": "tree.leaf", "after": parts,
                      "payload": {"role": "leaf", "expect": parts}})
        self.work()
        self.complete(job, "fanout", {"parts": len(parts)}, steps)

    def run_spawn(self, job):
        pl = job["payload"]
        children = pl["children"]
        events = job["events"] or {}
        outcomes = {k[len(CHILD_PREFIX):]: v for k, v in events.items()
                    if k.startswith(CHILD_PREFIX)}
        if all(c in outcomes for c in children):
            # Resumed with every child's outcome: the step's result from them.
            result = {"n": 0, "children": {}}
            for c in children:
                o = outcomes[c]
                if o.get("status") != "done":
                    self.unexpected("job %s: child %s ended %s: %s" % (job["id"], c,
                                                                      o.get("status"), o))
                n = sum(int(r.get("n", 0)) for r in (o.get("results") or {}).values()
                        if isinstance(r, dict))
                result["children"][c] = {"workflow_id": o.get("workflow_id"),
                                         "status": o.get("status"), "n": n}
                result["n"] += n
            self.work()
            self.complete(job, "spawn", result)
            return
        # (Re)start every child -- the same names again after a crash -- and
        # wait for them.
        p = {"q": job["queue"], "id": job["id"], "a": job["attempt"], "w": self.name,
             "spec": json.dumps(pl["spec"])}
        order = list(children)
        self.rng.shuffle(order)
        # --crash-spawns percent of the spawning steps (chosen by id) die
        # after their first child, at their first attempt.
        planned = (job["attempt"] == 1
                   and (job["id"] * 2654435761) % 2**32 % 100 < self.args.crash_spawns)
        for i, c in enumerate(order):
            self.work(0.4)
            p["name"] = c
            child = self.conn.execute(START_CHILD_SQL, p).fetchone()[0]
            if child is None:
                raise Stale("wf_start_child %s of %s/%s/%s returned NULL"
                            % (c, job["queue"], job["id"], job["attempt"]))
            self.maybe_die("between two wf_start_child", job, certainly=planned and i == 0)
        self.work(0.4)
        p["kind"] = "await"
        status = self.end(AWAIT_SQL, p)
        if status not in ("waiting", "pending"):
            self.unexpected("wf_await_children of job %s returned %s" % (job["id"], status))
        self.maybe_die("after wf_await_children", job)

    def run_job(self, job):
        self.maybe_die("after its claim", job)
        role = (job["payload"] or {}).get("role")
        if role == "leaf":
            self.run_leaf(job)
        elif role == "fanout":
            self.run_fanout(job)
        elif role == "spawn":
            self.run_spawn(job)
        else:
            self.unexpected("job %s has no role: %s" % (job["id"], job["payload"]))

    def main(self):
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        while not self.stop.is_set():
            if os.getppid() != self.parent:
                return  # the test is gone
            if self.conn is None or self.conn.closed or self.conn.broken:
                self.conn = None
                if not self.connect():
                    break
            job = None
            try:
                row = self.claim()
                if row is None:
                    continue
                job = dict(zip(["queue", "id", "attempt", "workflow_id", "step_name", "payload",
                                "inputs", "events"], row))
                self.run_job(job)
            except Stale as e:
                if self.conn is not None and not self.conn.broken and not self.conn.closed:
                    self.unexpected("stale token while connected: %s" % e)
            except psycopg.Error as e:
                what = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                state = getattr(getattr(e, "diag", None), "sqlstate", None)
                if self.lost(e):
                    log("%s: connection lost (%s %s)%s" % (
                        self.name, state, what,
                        " holding %s/%s/%s" % (job["queue"], job["id"], job["attempt"])
                        if job else ""))
                    try:
                        self.conn.close()
                    except Exception:
                        pass
                    self.conn = None
                    time.sleep(0.05)
                else:
                    self.unexpected("error %s %s: %s" % (state, what, traceback.format_exc()))
                    time.sleep(0.1)
        if self.conn is not None:
            self.conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--dsn", required=True)
    s.add_argument("--roots", type=int, default=2)
    s.add_argument("--root-steps", type=int, default=2)
    s.add_argument("--children", type=int, default=3)
    s.add_argument("--parts", type=int, default=3)
    s.add_argument("--grandchildren", type=int, default=2)
    w = sub.add_parser("worker")
    w.add_argument("--dsn", required=True)
    w.add_argument("--name", required=True)
    w.add_argument("--seed", default="0")
    w.add_argument("--work-ms", type=float, default=60)
    w.add_argument("--self-kill", type=float, default=0.0)
    w.add_argument("--crash-spawns", type=float, default=0.0)
    args = ap.parse_args()
    if args.mode == "submit":
        submit_main(args)
    else:
        Worker(args).main()


if __name__ == "__main__":
    main()
