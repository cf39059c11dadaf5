#!/usr/bin/python3
"""pg_wf demo, part 2: a workflow submitted in one call, with a human approval.

One article goes fetch -> (summarize, translate in parallel) -> approve ->
publish. The whole graph is one wf_submit() call. Two worker processes run
the steps through the SQL API:

- translate records each sentence with wf_checkpoint(); its first attempt
  fails after two sentences (a 503 from the translation service) and the
  retry gets them back in `checkpoints`, translating only the third;
- approve parks itself with wf_await_event(..., 'approve:<workflow id>'):
  the job is `waiting`, holds no worker and no attempt. The driver prints the
  workflow (wf_workflow) while it waits, then sends wf_signal(); the step is
  claimed again with the signal's payload in `events` and completes;
- publish gets the results of summarize, translate and approve in `inputs`,
  keyed by step name.

Connects like any libpq client (PGHOST, PGPORT, PGDATABASE, PGUSER);
scripts/demo.sh sets it all up and runs it after demo/pipeline.py.
"""
import json
import multiprocessing
import signal
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

QUEUE = "articles"
WORKERS = 2
WAIT_LIMIT = 30  # s: a step that does not move for this long fails the demo

T0 = time.monotonic()  # replaced in workers by the parent's start


def say(line):
    print(f"{time.monotonic() - T0:5.1f}s  {line}", flush=True)


def short(value, width=60):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= width else text[:width - 1] + "…"


class Parked(Exception):
    """The step parked its job (wf_await_event): nothing to complete now."""


class UpstreamError(Exception):
    """A transient failure of a service a step calls; worth a retry."""


# ---------------------------------------------------------------- the worker

class Job:
    """One claimed step, with what wf_claim hands a workflow step."""

    def __init__(self, conn, worker, row):
        (self.id, self.attempt, self.workflow_id, self.step, self.payload,
         self.inputs, self.checkpoints, self.events) = row
        self.conn, self.worker = conn, worker

    def say(self, text):
        say(f"{self.worker}: {self.step} (attempt {self.attempt}): {text}")

    def checkpoint(self, name, output):
        """Records a sub-step's output; a later attempt finds it in `checkpoints`."""
        return self.conn.execute("SELECT wf_checkpoint(%s, %s, %s, %s, %s)",
                                 (QUEUE, self.id, self.attempt, name, Jsonb(output))).fetchone()[0]


def work(conn, name, stop):
    while not stop.is_set():
        row = conn.execute(
            "SELECT id, attempt, workflow_id, step_name, payload, inputs, checkpoints, events"
            "  FROM wf_claim(%s, worker => %s, wait => '1 s')", (QUEUE, name)).fetchone()
        if row is None:
            continue
        job = Job(conn, name, row)
        try:
            result = STEPS[job.step](job)
        except Parked:
            continue
        except Exception as e:
            status = conn.execute("SELECT wf_fail(%s, %s, %s, %s)",
                                  (QUEUE, job.id, job.attempt, f"{type(e).__name__}: {e}")).fetchone()[0]
            job.say(f"failed ({e}): wf_fail -> {status}")
            continue
        ok = conn.execute("SELECT wf_complete(%s, %s, %s, %s)",
                          (QUEUE, job.id, job.attempt, Jsonb(result))).fetchone()[0]
        job.say(f"done -> {short(result, 70)}" if ok else "wf_complete refused a stale token")


# ---------------------------------------------------------------- the steps

GLOSSARY = {"the": "la", "city": "ville", "council": "conseil", "will": "va", "open": "ouvrir",
            "new": "nouvelles", "night": "nuit", "bus": "bus", "lines": "lignes", "in": "en",
            "march": "mars", "they": "elles", "run": "roulent", "every": "toutes", "minutes": "minutes",
            "until": "jusqu'à", "am": "h", "a": "un", "trial": "essai", "of": "de", "six": "six",
            "months": "mois", "comes": "vient", "first": "d'abord", "20": "20", "3": "3"}


def fetch(job):
    time.sleep(0.3)
    return {"url": job.payload["url"], "title": "Night buses from March",
            "text": "The city council will open new night bus lines in March. "
                    "They run every 20 minutes until 3 am. "
                    "A trial of six months comes first."}


def summarize(job):
    job.say(f"inputs {short(sorted(job.inputs))}, model {job.payload['model']}")
    time.sleep(0.8)
    return {"summary": job.inputs["fetch"]["text"].split(". ")[0] + "."}


def translate(job):
    sentences = [s.rstrip(".") for s in job.inputs["fetch"]["text"].split(". ")]
    done = job.checkpoints or {}
    if done:
        job.say(f"resumes with checkpoints {sorted(done)}: translates only what is missing")
    else:
        job.say(f"inputs {short(sorted(job.inputs))}, {len(sentences)} sentences,"
                " one wf_checkpoint each")
    out = []
    for n, sentence in enumerate(sentences, 1):
        key = f"sentence {n}"
        if key in done:
            out.append(done[key]["fr"])
            continue
        time.sleep(0.2)
        fr = " ".join(GLOSSARY.get(w.lower(), w) for w in sentence.split()) + "."
        job.say(f"wf_checkpoint({key!r}) -> {job.checkpoint(key, {'fr': fr})}")
        out.append(fr)
        if job.attempt == 1 and n == 2:
            raise UpstreamError("503 from the translation API")
    return {"lang": job.payload["lang"], "text": " ".join(out),
            "restored_from_checkpoints": len(done)}


def approve(job):
    event = f"approve:{job.workflow_id}"
    delivered = (job.events or {}).get(event)
    if delivered is None:
        # Parks the job: no worker waits, no attempt is spent; a signal (or
        # the timeout) makes it ready again with the event in `events`.
        status = job.conn.execute("SELECT wf_await_event(%s, %s, %s, %s, timeout => '10 minutes')",
                                  (QUEUE, job.id, job.attempt, event)).fetchone()[0]
        job.say(f"wf_await_event(.., '{event}') -> {status}: parked, worker free")
        raise Parked()
    job.say(f"claimed again with events {short(job.events, 200)}")
    if delivered["status"] != "signalled":
        raise RuntimeError(f"no approval: {delivered['status']}")
    return {"approved_by": delivered["payload"]["by"]}


def publish(job):
    job.say(f"inputs keyed by step name: {short({k: sorted(v) for k, v in job.inputs.items()}, 200)}")
    time.sleep(0.2)
    return {"published": job.payload["to"], "inputs": sorted(job.inputs),
            "approved_by": job.inputs["approve"]["approved_by"],
            "summary": job.inputs["summarize"]["summary"], "fr": job.inputs["translate"]["text"]}


STEPS = {"fetch": fetch, "summarize": summarize, "translate": translate,
         "approve": approve, "publish": publish}


# ---------------------------------------------------------------- the driver

def worker_process(name, stop, ready, t0):
    global T0
    T0 = t0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops us
    with psycopg.connect(autocommit=True, application_name=f"pg_wf demo {name}") as conn:
        ready.wait(timeout=30)
        work(conn, name, stop)


SPEC = {
    "name": "article-17",
    "queue": QUEUE,
    "steps": [
        {"name": "fetch", "payload": {"url": "https://news.example.com/17"}},
        {"name": "summarize", "after": ["fetch"], "payload": {"model": "small"}},
        {"name": "translate", "after": ["fetch"], "payload": {"lang": "fr"}},
        {"name": "approve", "after": ["summarize", "translate"]},
        {"name": "publish", "after": ["summarize", "translate", "approve"],
         "payload": {"to": "https://site.example.com/fr/17"}},
    ],
}


def show(conn, wid):
    """A compact table of the workflow, from wf_workflow()."""
    wf = conn.execute("SELECT wf_workflow(%s)", (wid,)).fetchone()[0]
    counts = ", ".join(f"{v} {k}" for k, v in wf["counts"].items() if v and k != "steps")
    print(f"  wf_workflow('{wid}'): {wf['name']}, {wf['status']} ({counts})")
    print(f"    {'step':10} {'status':9} {'attempt':>7}  {'after':30} detail")
    for s in wf["steps"]:
        if s["waiting_for"]:
            detail = f"waiting for '{s['waiting_for']}'"
        elif s["status"] == "done":
            detail = short(s["result"], 50)
        else:
            detail = short(s["last_error"] or "", 50)
        print(f"    {s['name']:10} {s['status']:9} {s['attempt']:>7}  {', '.join(s['after'] or []) or '-':30}"
              f" {detail}", flush=True)
    return wf


def wait_until(conn, wid, what, predicate):
    """Polls wf_workflow every 50 ms until predicate(workflow) holds."""
    last_change, last = time.monotonic(), None
    while True:
        wf = conn.execute("SELECT wf_workflow(%s)", (wid,)).fetchone()[0]
        if predicate(wf):
            return wf
        state = [(s["status"], s["attempt"]) for s in wf["steps"]]
        if state != last:
            last_change, last = time.monotonic(), state
        elif time.monotonic() - last_change > WAIT_LIMIT:
            say(f"!! giving up: nothing moved for {WAIT_LIMIT} s while waiting until {what}")
            show(conn, wid)
            return None
        if wf["status"] in ("failed", "cancelled"):
            say(f"!! the workflow ended {wf['status']} while waiting until {what}")
            show(conn, wid)
            return None
        time.sleep(0.05)


def step(wf, name):
    return next(s for s in wf["steps"] if s["name"] == name)


def run(conn):
    conn.execute("SELECT wf_configure_queue(%s, backoff_base => '200 ms', backoff_max => '1 s')",
                 (QUEUE,))
    wid = conn.execute("SELECT wf_submit(%s)", (Jsonb(SPEC),)).fetchone()[0]
    say(f"wf_submit: {len(SPEC['steps'])} steps in one call -> workflow {wid}")
    say("  fetch -> (summarize | translate) -> approve (waits for 'approve:<id>') -> publish")

    wf = wait_until(conn, wid, "approve waits",
                    lambda wf: step(wf, "approve")["status"] == "waiting")
    if wf is None:
        return 1
    say("approve is waiting for a human; the workflow meanwhile:")
    show(conn, wid)
    row = conn.execute("SELECT status, steps, done, waiting, blocked FROM wf.workflows"
                       " WHERE workflow_id = %s", (wid,)).fetchone()
    print(f"  wf.workflows: status {row[0]}, {row[1]} steps: {row[2]} done, {row[3]} waiting,"
          f" {row[4]} blocked", flush=True)

    time.sleep(0.5)  # a human takes a moment; nothing depends on this
    woken = conn.execute("SELECT wf_signal(%s, %s)",
                         (f"approve:{wid}", Jsonb({"by": "demo"}))).fetchone()[0]
    say(f"driver: wf_signal('approve:{wid}', '{{\"by\": \"demo\"}}') -> {woken} job woken")

    wf = wait_until(conn, wid, "the workflow finishes", lambda wf: wf["status"] == "done")
    if wf is None:
        return 1
    say("workflow finished:")
    show(conn, wid)
    return check(conn, wid, wf)


def check(conn, wid, wf):
    ok = True
    print("checks:", flush=True)

    def report(passed, text):
        nonlocal ok
        ok &= passed
        print(f"  {'ok  ' if passed else 'FAIL'}  {text}", flush=True)

    status, steps, done, took = conn.execute(
        "SELECT status, steps, done, finished_at - started_at FROM wf.workflows"
        " WHERE workflow_id = %s", (wid,)).fetchone()
    report(status == "done" and steps == done == len(SPEC["steps"]),
           f"wf.workflows: status {status}, {done} of {steps} steps done"
           + (f" ({took.total_seconds():.1f} s from submit to finish)" if took else ""))
    events = conn.execute("SELECT events FROM wf.jobs WHERE workflow_id = %s AND step_name = 'approve'",
                          (wid,)).fetchone()[0]
    got = (events or {}).get(f"approve:{wid}", {})
    report(got.get("status") == "signalled" and got.get("payload") == {"by": "demo"},
           f"approve's events column: {short(events, 120)}")
    publish = step(wf, "publish")["result"] or {}
    report(publish.get("inputs") == ["approve", "summarize", "translate"]
           and publish.get("approved_by") == "demo",
           f"publish got inputs keyed by step name: {publish.get('inputs')}, approved by"
           f" {publish.get('approved_by')!r}")
    tr = step(wf, "translate")
    checkpoints = conn.execute("SELECT count(*) FROM wf.checkpoint c JOIN wf.jobs j"
                               "  ON j.queue = c.queue AND j.id = c.job_id"
                               " WHERE j.workflow_id = %s AND j.step_name = 'translate'",
                               (wid,)).fetchone()[0]
    report(tr["attempt"] == 2 and (tr["result"] or {}).get("restored_from_checkpoints") == 2
           and checkpoints == 3,
           f"translate: attempt {tr['attempt']} restored {(tr['result'] or {}).get('restored_from_checkpoints')}"
           f" sentences from its checkpoints ({checkpoints} recorded in all)")
    return 0 if ok else 1


def main():
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    ready = ctx.Barrier(WORKERS + 1)
    with psycopg.connect(autocommit=True, application_name="pg_wf demo workflow") as conn:
        if conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()[0]:
            sys.exit(f"queue {QUEUE!r} already has jobs: run the demo on a fresh database")
        procs = [ctx.Process(target=worker_process, args=(f"a{i + 1}", stop, ready, T0),
                             name=f"a{i + 1}") for i in range(WORKERS)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=30)
            say(f"started {WORKERS} workers on queue {QUEUE!r} (pids"
                f" {', '.join(str(p.pid) for p in procs)})")
            return run(conn)
        except BaseException:  # Ctrl-C or an error: stop the workers now
            for p in procs:
                p.terminate()
            raise
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
