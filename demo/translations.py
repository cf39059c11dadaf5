#!/usr/bin/python3
"""pg_wf demo, part 3: child workflows, progress, and waiting for a result.

A manual must be translated into four languages. The driver submits one
workflow for it (pg_wf.submit, i.e. wf_submit) with a single step, localize,
and then simply waits for the whole result with pg_wf.wait_workflow(conn, id,
timeout=60) (wf_wait_workflow): one blocking call, woken by the commit that
finishes the workflow, no polling loop. Four worker processes, each a
pg_wf.Worker of the Python library (clients/python) with one handler per
step, run the steps:

- localize reads the document, finds its target languages and starts ONE
  CHILD WORKFLOW PER LANGUAGE with job.start_child (wf_start_child; named
  after the language, each child is translate -> proofread), then calls
  job.await_children(), which parks the job (wf_await_children): it is
  `waiting` and holds no worker. When the last child has finished it is
  claimed again, the handler runs again from the top, and await_children now
  returns each child's outcome (delivered into its `events` as
  "wf:child:<lang>"). It completes with the collected translations, and
  job.add_steps adds one publish step per translation that came back (a
  fan-out known only at run time) and an index step after them all: they
  join the workflow as it completes (wf_complete_with_steps).
- translate reports job.progress({"sentences_done": k, "of": n})
  (wf_progress) after each sentence; a second connection of the driver reads
  it from wf.jobs and prints every language's progress while the driver's
  wait blocks. The Spanish translate fails once (a 503) and pg_wf retries it
  inside its child workflow; the parent never notices.
- at the end the driver prints the tree: pg_wf.workflow (wf_workflow) of the
  root, its localize step's "children", and each child's steps.

Connects like any libpq client (PGHOST, PGPORT, PGDATABASE, PGUSER);
scripts/demo.sh sets it all up and runs it after demo/workflow.py.
"""
import functools
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time

import psycopg

# The library from this repository (elsewhere: pip install clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import pg_wf  # noqa: E402

QUEUE = "translations"
WORKERS = 4
HARD_LIMIT = 75  # s: the whole part; the wait itself gives up after 60 s
FLAKY = "es"     # this language's translate fails on its first attempt

T0 = time.monotonic()  # replaced in workers by the parent's start


def say(line):
    # One write per line: worker processes share this stdout, unbuffered
    # under PYTHONUNBUFFERED, and a line must not be split by another's.
    sys.stdout.write(f"{time.monotonic() - T0:5.1f}s  {line}\n")
    sys.stdout.flush()


def short(value, width=60):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = text.split("\n", 1)[0]  # an error's first line, without its traceback
    return text if len(text) <= width else text[:width - 1] + "…"


class UpstreamError(Exception):
    """A transient failure of a service a step calls; worth a retry."""


# ---------------------------------------------------------------- the document
# A stand-in for a document store and a translation service.

DOCUMENTS = {
    "manual-7": {
        "title": "Quick start for the coffee machine",
        "sentences": ["Fill the tank with fresh water.",
                      "Insert a capsule and close the lid.",
                      "Press the large button once.",
                      "The coffee is ready in thirty seconds.",
                      "Empty the drip tray every week.",
                      "Descale the machine every three months."],
        "translate_into": ["fr", "de", "es", "it"],
    },
}

PHRASEBOOK = {
    "fr": ["Démarrage rapide de la machine à café",
           "Remplissez le réservoir d'eau fraîche.",
           "Insérez une capsule et fermez le couvercle.",
           "Appuyez une fois sur le grand bouton.",
           "Le café est prêt en trente secondes.",
           "Videz le bac d'égouttage chaque semaine.",
           "Détartrez la machine tous les trois mois."],
    "de": ["Schnellstart für die Kaffeemaschine",
           "Füllen Sie den Tank mit frischem Wasser.",
           "Legen Sie eine Kapsel ein und schließen Sie den Deckel.",
           "Drücken Sie einmal die große Taste.",
           "Der Kaffee ist in dreißig Sekunden fertig.",
           "Leeren Sie die Tropfschale jede Woche.",
           "Entkalken Sie die Maschine alle drei Monate."],
    "es": ["Inicio rápido de la cafetera",
           "Llene el depósito con agua fresca.",
           "Inserte una cápsula y cierre la tapa.",
           "Pulse el botón grande una vez.",
           "El café está listo en treinta segundos.",
           "Vacíe la bandeja de goteo cada semana.",
           "Descalcifique la máquina cada tres meses."],
    "it": ["Guida rapida della macchina da caffè",
           "Riempire il serbatoio con acqua fresca.",
           "Inserire una capsula e chiudere il coperchio.",
           "Premere una volta il pulsante grande.",
           "Il caffè è pronto in trenta secondi.",
           "Svuotare la vaschetta raccogligocce ogni settimana.",
           "Decalcificare la macchina ogni tre mesi."],
}
SECONDS_PER_SENTENCE = {"fr": 0.2, "de": 0.3, "es": 0.2, "it": 0.15}


def child_spec(doc, lang):
    """The child workflow of one language: what pg_wf.submit would take."""
    return {"name": f"{doc}/{lang}", "queue": QUEUE,
            "steps": [{"name": "translate", "payload": {"doc": doc, "lang": lang}},
                      {"name": "proofread", "after": ["translate"], "payload": {"lang": lang}}]}


# ---------------------------------------------------------------- the worker
# One pg_wf.Worker per process, one handler per step (worker_process, below).
# The library claims, heartbeats, completes with the handler's return value,
# turns an exception into wf_fail, and ends a run that parked its job.

def tell(job, text):
    lang = (job.payload or {}).get("lang")
    what = f"{job.step} {lang}" if lang and job.step in ("translate", "proofread") else job.step
    say(f"{job.worker_name}: {what} (attempt {job.attempt}): {text}")


def narrated(step):
    """A step's handler that says what it returned."""
    @functools.wraps(step)
    def handler(job):
        result = step(job)
        tell(job, f"done -> {short(result, 80)}")
        return result
    return handler


# ---------------------------------------------------------------- the steps

def localize(job):
    doc_name = job.payload["doc"]
    doc = DOCUMENTS[doc_name]
    langs = doc["translate_into"]
    arrived = job.child_outcomes()  # the outcomes this claim's events hold
    waiting = not set(langs) <= arrived.keys()
    if not arrived:
        tell(job, f"reads {doc_name!r}: {len(doc['sentences'])} sentences, to translate into"
                  f" {', '.join(langs)}")

    # One child workflow per language. Idempotent per (job, name): every run
    # of the handler starts them again and gets the same children back.
    children = {lang: job.start_child(lang, child_spec(doc_name, lang)) for lang in langs}
    if waiting:
        tell(job, f"job.start_child x{len(langs)} (wf_start_child; translate -> proofread each): "
                  + ", ".join(f"{lang} {str(child)[:8]}" for lang, child in children.items()))
        tell(job, "job.await_children(): wf_await_children parks the job until every child has"
                  " finished, worker free")
    # Parks the job and ends this run (the library's pg_wf.Suspended) until
    # the last child has finished; the handler then runs again from the top
    # and this returns the outcomes. After the timeout: pg_wf.ChildrenTimeout.
    outcomes = job.await_children(timeout="1 minute")

    tell(job, "claimed again, job.await_children() returns the children's outcomes"
              " (its events \"wf:child:<lang>\"):" + "".join(
                  f"\n         {lang}: status {outcomes[lang].status}, results"
                  f" {short(outcomes[lang].results, 72)}" for lang in langs))
    translations = {lang: o.results["proofread"] for lang, o in outcomes.items() if o.ok}
    failed = sorted(set(langs) - translations.keys())
    # One publish step per translation that came back, and an index after
    # them all: steps only known now, added as this step completes.
    publish = [{"name": f"publish-{lang}", "after": ["localize"], "payload": {"lang": lang}}
               for lang in langs if lang in translations]
    index = {"name": "index", "after": [s["name"] for s in publish], "payload": {"doc": doc_name}}
    job.add_steps(publish + [index])
    tell(job, f"done with {len(translations)} translations; job.add_steps:"
              f" {', '.join(s['name'] for s in publish + [index])} join the workflow as it"
              " completes (wf_complete_with_steps)")
    return {"doc": doc_name, "translations": translations, "failed": failed}


def translate(job):
    lang, doc = job.payload["lang"], DOCUMENTS[job.payload["doc"]]
    phrases = PHRASEBOOK[lang]
    n = len(doc["sentences"])
    if job.attempt > 1:
        tell(job, "claimed again after the failure: starts over")
    job.progress({"sentences_done": 0, "of": n})
    out = []
    for k in range(1, n + 1):
        time.sleep(SECONDS_PER_SENTENCE[lang])
        out.append(phrases[k])
        # wf_progress: kept in the claim row (unlogged), no WAL per report.
        job.progress({"sentences_done": k, "of": n})
        if lang == FLAKY and job.attempt == 1 and k == 3:
            raise UpstreamError("503 from the translation API")  # wf_fail: retried
    return {"lang": lang, "title": phrases[0], "sentences": out}


def proofread(job):
    t = job.inputs["translate"]
    time.sleep(0.2)
    text = " ".join(t["sentences"])
    if not all(s.endswith(".") for s in t["sentences"]):
        raise ValueError("a sentence without its full stop")
    return {"lang": t["lang"], "title": t["title"], "text": text, "sentences": len(t["sentences"])}


def publish(job):
    lang = job.payload["lang"]
    t = job.inputs["localize"]["translations"][lang]
    time.sleep(0.1)
    return {"lang": lang, "url": f"https://docs.example.com/{lang}/manual-7", "title": t["title"]}


def index(job):
    time.sleep(0.1)
    pages = {r["lang"]: {"title": r["title"], "url": r["url"]} for r in job.inputs.values()}
    return {"doc": job.payload["doc"], "pages": dict(sorted(pages.items()))}


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
    worker.register(QUEUE, localize, step="localize")
    worker.register(QUEUE, translate, step="translate")
    worker.register(QUEUE, proofread, step="proofread")
    worker.register(QUEUE, narrated(index), step="index")
    worker.register(QUEUE, narrated(publish))  # the queue's other steps: publish-<lang>
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops us (SIGTERM)
    ready.wait(timeout=30)
    worker.run()  # until SIGTERM (the parent's, at the end, on Ctrl-C or past the limit)


SPEC = {"name": "manual-7", "queue": QUEUE,
        "steps": [{"name": "localize", "payload": {"doc": "manual-7"}}]}


class Watcher(threading.Thread):
    """The driver's second connection: prints the children's progress from
    wf.jobs every 0.5 s (when it changed) while the first one waits."""

    QUERY = ("SELECT payload->>'lang', step_name, status, attempt, progress, last_error"
             "  FROM wf.jobs WHERE child_of = %s ORDER BY id")

    def __init__(self, parent_job, stop):
        super().__init__(daemon=True)
        self.parent_job = parent_job
        self.stop = stop  # set by the driver when the wait returned or gave up
        self.partial = set()  # languages seen part-way through their translation
        self.saw_parked = False
        self.error = None

    def run(self):
        try:
            with psycopg.connect(autocommit=True, application_name="pg_wf demo watcher") as conn:
                last, last_print = None, 0.0
                while not self.stop.wait(0.1):
                    if not self.saw_parked:
                        status, waiting_for = conn.execute(
                            "SELECT status, waiting_for FROM wf.jobs WHERE id = %s",
                            (self.parent_job,)).fetchone()
                        if status == "waiting":
                            self.saw_parked = True
                            say(f"  wf.jobs: localize is {status}, waiting_for '{waiting_for}'")
                    line = self.describe(conn.execute(self.QUERY, (self.parent_job,)).fetchall())
                    if line and line != last and time.monotonic() - last_print >= 0.5:
                        say(f"  progress  {line}")
                        last, last_print = line, time.monotonic()
        except Exception as e:  # reported by the checks
            self.error = e

    def describe(self, rows):
        state = {}
        for lang, step, status, attempt, progress, last_error in rows:
            if step == "translate":
                done, of = (progress or {}).get("sentences_done"), (progress or {}).get("of")
                if status == "running":
                    state[lang] = f"{done}/{of}" + (f" (try {attempt})" if attempt > 1 else "")
                    if done and done < of:
                        self.partial.add(lang)
                elif status == "pending" and last_error:
                    state[lang] = f"{done}/{of} failed"
                elif status != "done":
                    state[lang] = status
            elif status == "running":
                state[lang] = "proofreading"
            elif status == "done":
                state[lang] = "done"
        return "  ".join(f"{lang} {what:13}" for lang, what in state.items()).rstrip()


def show_tree(conn, wid):
    """The workflow as pg_wf.workflow() (wf_workflow) describes it, its children's too."""
    wf = pg_wf.workflow(conn, wid)
    counts = ", ".join(f"{v} {k}" for k, v in wf["counts"].items() if v and k != "steps")
    print(f"  wf_workflow('{wid}'): {wf['name']}, {wf['status']} ({counts})")
    for s in wf["steps"]:
        after = ", ".join(s["after"] or []) or "-"
        after = after if len(after) <= 30 else after[:29] + "…"
        detail = short(s["result"], 46) if s["status"] == "done" else short(s["last_error"] or "")
        if s["children"]:
            detail = f"children: {', '.join(c['name'] for c in s['children'])}"
        print(f"    {s['name']:11} {s['status']:9} attempt {s['attempt']}  after {after:30} {detail}")
        kids = s["children"] or []
        for i, c in enumerate(kids):
            child = pg_wf.workflow(conn, c["workflow_id"])
            steps = ", ".join(f"{cs['name']} {cs['status']}"
                              + (f" (attempt {cs['attempt']}, last error: {short(cs['last_error'], 40)})"
                                 if cs["attempt"] > 1 else "")
                              for cs in child["steps"])
            print(f"      {'└' if i == len(kids) - 1 else '├'} {c['name']} {c['status']:5}"
                  f" {child['name']} (child_of {child['child_of']}): {steps}")
    print(flush=True)
    return wf


def run(conn, stop_watching):
    pg_wf.configure_queue(conn, QUEUE, backoff_base="200 ms", backoff_max="1 s")
    say(f"driver: pg_wf.submit (wf_submit) of {SPEC['name']!r}: one step, localize; the rest it"
        " decides itself")
    wid = pg_wf.submit(conn, SPEC)
    localize_id = conn.execute("SELECT id FROM wf.jobs WHERE workflow_id = %s",
                               (wid,)).fetchone()[0]
    say(f"        -> workflow {wid}, localize is job {localize_id}")
    watcher = Watcher(localize_id, stop_watching)
    watcher.start()
    say(f"driver: pg_wf.wait_workflow(conn, '{str(wid)[:8]}…', timeout=60) (wf_wait_workflow)"
        " blocks until it has finished;")
    say(f"        a 2nd connection prints the children's wf.jobs.progress (WHERE child_of ="
        f" {localize_id})")
    start = time.monotonic()
    status, result, error = pg_wf.wait_workflow(conn, wid, timeout=60)
    waited = time.monotonic() - start
    lag_ms = conn.execute("SELECT extract(epoch FROM clock_timestamp() - finished_at) * 1000"
                          "  FROM wf.workflows WHERE workflow_id = %s", (wid,)).fetchone()[0]
    stop_watching.set()
    watcher.join(timeout=5)
    lag = f", {lag_ms:.0f} ms after the commit that finished it" if lag_ms is not None else ""
    say(f"pg_wf.wait_workflow returned after {waited:.1f} s{lag}: status {status},"
        f" error {short(error) if error else None}")
    print("  result (the final steps' results, by step name):")
    for name, value in (result or {}).items():
        print(f"    {name}: doc {value.get('doc')!r}, pages:")
        for lang, page in (value.get("pages") or {}).items():
            print(f"      {lang}  {page['title']:40} {page['url']}")
    print(flush=True)
    say("the tree: the root, its localize step's children (wf_workflow of each), the added steps")
    wf = show_tree(conn, wid)
    return check(conn, wid, wf, status, result, lag_ms, watcher)


def check(conn, wid, wf, status, result, lag_ms, watcher):
    ok = True
    print("checks:", flush=True)

    def report(passed, text):
        nonlocal ok
        ok &= passed
        print(f"  {'ok  ' if passed else 'FAIL'}  {text}", flush=True)

    langs = DOCUMENTS["manual-7"]["translate_into"]
    pages = ((result or {}).get("index") or {}).get("pages") or {}
    report(status == "done" and sorted(pages) == sorted(langs)
           and all(pages[l]["title"] == PHRASEBOOK[l][0] for l in langs),
           f"wait_workflow: status {status}, the index lists {len(pages)} translated pages")
    report(lag_ms is not None and lag_ms < 1000,
           f"the wait was woken by the finishing commit ({lag_ms:.0f} ms later), not by a poll"
           if lag_ms is not None else "the workflow has no finished_at")
    loc = next(s for s in wf["steps"] if s["name"] == "localize")
    children = {c["name"]: c for c in loc["children"] or []}
    report(sorted(children) == sorted(langs) and all(c["status"] == "done" for c in children.values()),
           f"localize started {len(children)} child workflows, named by language, all done")
    rows = conn.execute("SELECT count(*), count(DISTINCT workflow_id) FROM wf.jobs WHERE child_of = %s",
                        (loc["id"],)).fetchone()
    parents = conn.execute("SELECT count(*) FROM wf.workflows WHERE child_of = %s",
                           (loc["id"],)).fetchone()[0]
    report(rows == (2 * len(langs), len(langs)) and parents == len(langs),
           f"their {rows[0]} steps (wf.jobs) and {parents} workflows (wf.workflows) have child_of ="
           f" {loc['id']}")
    events = loc["events"] or {}
    got = {k.split(":", 2)[2]: v for k, v in events.items() if k.startswith("wf:child:")}
    texts_ok = all(got.get(l, {}).get("results", {}).get("proofread", {}).get("text")
                   == " ".join(PHRASEBOOK[l][1:]) for l in langs)
    report(sorted(got) == sorted(langs) and texts_ok
           and all(v["workflow_id"] == children[k]["workflow_id"] for k, v in got.items()),
           f"localize's events hold {len(got)} outcomes \"wf:child:<lang>\", each with its"
           " proofread text")
    translated = (loc["result"] or {}).get("translations") or {}
    report(sorted(translated) == sorted(langs),
           f"localize completed with {len(translated)} collected translations")
    flaky = conn.execute("SELECT attempt, last_error, status FROM wf.jobs WHERE child_of = %s"
                         "   AND step_name = 'translate' AND payload->>'lang' = %s",
                         (loc["id"], FLAKY)).fetchone()
    report(flaky is not None and flaky[0] == 2 and flaky[2] == "done" and "503" in (flaky[1] or ""),
           f"translate {FLAKY}: failed once and was retried inside its child (attempt"
           f" {flaky and flaky[0]}, {flaky and flaky[2]})")
    progress = conn.execute("SELECT payload->>'lang', progress FROM wf.jobs WHERE child_of = %s"
                            "   AND step_name = 'translate' ORDER BY 1", (loc["id"],)).fetchall()
    n = len(DOCUMENTS["manual-7"]["sentences"])
    report(watcher.error is None and watcher.partial == set(langs)
           and all(p == {"sentences_done": n, "of": n} for _, p in progress),
           f"job.progress: the watcher saw every language part-way ({', '.join(sorted(watcher.partial))}),"
           f" each kept its last report {{\"sentences_done\": {n}, \"of\": {n}}}"
           + (f" -- watcher error: {watcher.error}" if watcher.error else ""))
    added = [s["name"] for s in wf["steps"] if s["name"] != "localize"]
    idx = next((s for s in wf["steps"] if s["name"] == "index"), None)
    report(sorted(added) == sorted([f"publish-{l}" for l in langs] + ["index"])
           and idx is not None and sorted(idx["after"] or []) == sorted(f"publish-{l}" for l in langs)
           and all(s["status"] == "done" for s in wf["steps"]),
           f"job.add_steps added {len(added)} steps to the running workflow, all done")
    return 0 if ok else 1


def main():
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(WORKERS + 1)
    stop_watching = threading.Event()

    def too_long(signum, frame):
        raise TimeoutError(f"part 3 took over {HARD_LIMIT} s")

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(HARD_LIMIT)
    with psycopg.connect(autocommit=True, application_name="pg_wf demo translations") as conn:
        if conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()[0]:
            sys.exit(f"queue {QUEUE!r} already has jobs: run the demo on a fresh database")
        procs = [ctx.Process(target=worker_process, args=(f"t{i + 1}", ready, T0),
                             name=f"t{i + 1}") for i in range(WORKERS)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=30)
            say(f"started {WORKERS} workers on queue {QUEUE!r} (pids"
                f" {', '.join(str(p.pid) for p in procs)})")
            return run(conn, stop_watching)
        except TimeoutError as e:
            say(f"!! giving up: {e}")
            try:  # it may be inside a statement: cancel that, then close
                conn.cancel()
            finally:
                conn.close()
            return 1
        finally:  # done, Ctrl-C, an error or the limit: SIGTERM, each worker shuts down gracefully
            signal.alarm(0)
            stop_watching.set()
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
