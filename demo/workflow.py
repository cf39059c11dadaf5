#!/usr/bin/python3
"""pg_wf demo, part 2: a workflow submitted in one call, with a human approval.

One article goes fetch -> (summarize, translate in parallel) -> approve ->
publish. The whole graph is one wf_submit() call (pg_wf.submit). Two worker
processes, each a pg_wf.Worker of the Python library (clients/python) with
one handler per step, run the steps:

- translate runs each sentence in job.checkpoint() (wf_checkpoint); its
  first attempt fails after two sentences (a 503 from the translation
  service) and the retry gets them back from its `checkpoints`, translating
  only the third;
- approve calls job.await_event('approve:<workflow id>'), which parks the job
  (wf_await_event): it is `waiting`, holds no worker and no attempt. The
  driver prints the workflow (wf_workflow) while it waits, then sends
  wf_signal() (pg_wf.signal); the step is claimed again, and await_event
  returns the signal's payload from its `events`;
- publish gets the results of summarize, translate and approve in `inputs`,
  keyed by step name.

Connects like any libpq client (PGHOST, PGPORT, PGDATABASE, PGUSER);
scripts/demo.sh sets it all up and runs it after demo/pipeline.py.
"""
import functools
import json
import logging
import multiprocessing
import os
import signal
import sys
import time

import psycopg

# The library from this repository (elsewhere: pip install clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import pg_wf  # noqa: E402

QUEUE = "articles"
WORKERS = 2
WAIT_LIMIT = 30  # s: a step that does not move for this long fails the demo

T0 = time.monotonic()  # replaced in workers by the parent's start


def say(line):
    print(f"{time.monotonic() - T0:5.1f}s  {line}", flush=True)


def short(value, width=60):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = text.split("\n", 1)[0]  # an error's first line, without its traceback
    return text if len(text) <= width else text[:width - 1] + "…"


class UpstreamError(Exception):
    """A transient failure of a service a step calls; worth a retry."""


# ---------------------------------------------------------------- the worker
# One pg_wf.Worker per process, one handler per step (STEPS, below). The
# library claims, heartbeats, completes with the handler's return value, turns
# an exception into wf_fail, and ends a run that parked its job.

def tell(job, text):
    say(f"{job.worker_name}: {job.step} (attempt {job.attempt}): {text}")


def narrated(step):
    """A step's handler that says what it returned."""
    @functools.wraps(step)
    def handler(job):
        result = step(job)
        tell(job, f"done -> {short(result, 70)}")
        return result
    return handler


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
    tell(job, f"inputs {short(sorted(job.inputs))}, model {job.payload['model']}")
    time.sleep(0.8)
    return {"summary": job.inputs["fetch"]["text"].split(". ")[0] + "."}


def translate(job):
    sentences = [s.rstrip(".") for s in job.inputs["fetch"]["text"].split(". ")]
    restored = len(job.checkpoints)  # what earlier attempts recorded
    if restored:
        tell(job, f"resumes with checkpoints {sorted(job.checkpoints)}: translates only what is missing")
    else:
        tell(job, f"inputs {short(sorted(job.inputs))}, {len(sentences)} sentences,"
                  " one job.checkpoint (wf_checkpoint) each")
    out = []
    for n, sentence in enumerate(sentences, 1):
        key = f"sentence {n}"
        recorded_before = key in job.checkpoints

        def translate_sentence():  # runs once across attempts
            time.sleep(0.2)
            return {"fr": " ".join(GLOSSARY.get(w.lower(), w) for w in sentence.split()) + "."}

        out.append(job.checkpoint(key, translate_sentence)["fr"])
        if recorded_before:
            continue
        tell(job, f"wf_checkpoint({key!r}) -> recorded")
        if job.attempt == 1 and n == 2:
            raise UpstreamError("503 from the translation API")
    return {"lang": job.payload["lang"], "text": " ".join(out),
            "restored_from_checkpoints": restored}


def approve(job):
    event = f"approve:{job.workflow_id}"
    if event not in job.events:
        # Parks the job: no worker waits, no attempt is spent; a signal (or
        # the timeout) makes it ready again with the event in `events`, and the
        # handler runs again from the top.
        tell(job, f"job.await_event('{event}'): wf_await_event parks the job, worker free")
    else:
        tell(job, f"claimed again with events {short(job.events, 200)}")
    try:
        approval = job.await_event(event, timeout="10 minutes")
    except pg_wf.EventTimeout:
        raise RuntimeError("no approval: timed_out")
    return {"approved_by": approval["by"]}


def publish(job):
    tell(job, f"inputs keyed by step name: {short({k: sorted(v) for k, v in job.inputs.items()}, 200)}")
    time.sleep(0.2)
    return {"published": job.payload["to"], "inputs": sorted(job.inputs),
            "approved_by": job.inputs["approve"]["approved_by"],
            "summary": job.inputs["summarize"]["summary"], "fr": job.inputs["translate"]["text"]}


STEPS = {"fetch": fetch, "summarize": summarize, "translate": translate,
         "approve": approve, "publish": publish}


# ---------------------------------------------------------------- the driver

class Narrator(logging.Handler):
    """Prints the library's log records (failures, parks) as demo lines."""

    def emit(self, record):
        say(f"{record.processName}: {record.getMessage()}")


def worker_process(name, ready, t0):
    global T0
    T0 = t0
    logging.getLogger("pg_wf").addHandler(Narrator())
    logging.getLogger("pg_wf").setLevel(logging.INFO)
    logging.getLogger("pg_wf.worker").setLevel(logging.WARNING)  # start and stop lines
    worker = pg_wf.Worker(name=name, claim_wait=1, shutdown_timeout=5)
    for step, fn in STEPS.items():
        worker.register(QUEUE, narrated(fn), step=step)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops us (SIGTERM)
    ready.wait(timeout=30)
    worker.run()  # until SIGTERM (the parent's, at the end, or on Ctrl-C)


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
    wf = pg_wf.workflow(conn, wid)
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
        wf = pg_wf.workflow(conn, wid)
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
    pg_wf.configure_queue(conn, QUEUE, backoff_base="200 ms", backoff_max="1 s")
    wid = pg_wf.submit(conn, SPEC)
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
    woken = pg_wf.signal(conn, f"approve:{wid}", {"by": "demo"})
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
    ready = ctx.Barrier(WORKERS + 1)
    with psycopg.connect(autocommit=True, application_name="pg_wf demo workflow") as conn:
        if conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()[0]:
            sys.exit(f"queue {QUEUE!r} already has jobs: run the demo on a fresh database")
        procs = [ctx.Process(target=worker_process, args=(f"a{i + 1}", ready, T0),
                             name=f"a{i + 1}") for i in range(WORKERS)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=30)
            say(f"started {WORKERS} workers on queue {QUEUE!r} (pids"
                f" {', '.join(str(p.pid) for p in procs)})")
            return run(conn)
        finally:  # done, Ctrl-C or an error: SIGTERM, each worker shuts down gracefully
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
                    p.join()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
