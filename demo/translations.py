#!/usr/bin/python3
"""pg_wf demo, part 3: child workflows, progress, and waiting for a result.

A manual must be translated into four languages. The driver submits one
workflow for it (wf_submit) with a single step, localize, and then simply
waits for the whole result with wf_wait_workflow(id, '60 s'): one blocking
call, woken by the commit that finishes the workflow, no polling loop.

- localize reads the document, finds its target languages and starts ONE
  CHILD WORKFLOW PER LANGUAGE with wf_start_child (named after the language;
  each child is translate -> proofread), then parks with wf_await_children:
  the job is `waiting` and holds no worker. When the last child has finished
  it is claimed again, and its `events` hold each child's outcome as
  "wf:child:<lang>". It completes with the collected translations, and with
  wf_complete_with_steps adds one publish step per translation that came
  back (a fan-out known only at run time) and an index step after them all.
- translate reports wf_progress({"sentences_done": k, "of": n}) after each
  sentence; a second connection of the driver reads it from wf.jobs and
  prints every language's progress while the driver's wf_wait_workflow
  blocks. The Spanish translate fails once (a 503) and pg_wf retries it
  inside its child workflow; the parent never notices.
- at the end the driver prints the tree: wf_workflow of the root, its
  localize step's "children", and each child's steps.

Connects like any libpq client (PGHOST, PGPORT, PGDATABASE, PGUSER);
scripts/demo.sh sets it all up and runs it after demo/workflow.py.
"""
import json
import multiprocessing
import signal
import sys
import threading
import time

import psycopg
from psycopg.types.json import Jsonb

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
    return text if len(text) <= width else text[:width - 1] + "…"


class Parked(Exception):
    """The step parked its job (wf_await_children): nothing to complete now."""


class UpstreamError(Exception):
    """A transient failure of a service a step calls; worth a retry."""


class JobLost(Exception):
    """The job is no longer ours: stop working on it."""


class WithSteps:
    """A step's result that also adds steps to its workflow (fan-out)."""

    def __init__(self, result, steps):
        self.result, self.steps = result, steps


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
    """The child workflow of one language: what wf_submit would take."""
    return {"name": f"{doc}/{lang}", "queue": QUEUE,
            "steps": [{"name": "translate", "payload": {"doc": doc, "lang": lang}},
                      {"name": "proofread", "after": ["translate"], "payload": {"lang": lang}}]}


# ---------------------------------------------------------------- the worker

class Job:
    """One claimed step, with what wf_claim hands a workflow step."""

    def __init__(self, conn, worker, row):
        (self.id, self.attempt, self.workflow_id, self.step, self.payload,
         self.inputs, self.checkpoints, self.events) = row
        self.conn, self.worker = conn, worker

    def say(self, text):
        lang = (self.payload or {}).get("lang")
        what = f"{self.step} {lang}" if lang and self.step in ("translate", "proofread") else self.step
        say(f"{self.worker}: {what} (attempt {self.attempt}): {text}")

    def sql(self, query, *args):
        """A call that takes the job's fencing token (queue, id, attempt) first."""
        return self.conn.execute(query, (QUEUE, self.id, self.attempt) + args).fetchone()[0]

    def progress(self, report):
        if not self.sql("SELECT wf_progress(%s, %s, %s, %s)", Jsonb(report)):
            raise JobLost(f"job {self.id} attempt {self.attempt} is no longer ours")


def work(conn, name, stop):
    while not stop.is_set():
        row = conn.execute(
            "SELECT id, attempt, workflow_id, step_name, payload, inputs, checkpoints, events"
            "  FROM wf_claim(%s, worker => %s, wait => '1 s')", (QUEUE, name)).fetchone()
        if row is None:
            continue
        job = Job(conn, name, row)
        try:
            result = STEPS[job.step.split("-")[0]](job)
        except (Parked, JobLost):
            continue
        except Exception as e:
            status = job.sql("SELECT wf_fail(%s, %s, %s, %s)", f"{type(e).__name__}: {e}")
            job.say(f"failed ({e}): wf_fail -> {status}"
                    + (", pg_wf retries it after a backoff" if status == "pending" else ""))
            continue
        if isinstance(result, WithSteps):
            ok = job.sql("SELECT wf_complete_with_steps(%s, %s, %s, %s, %s)",
                         Jsonb(result.result), Jsonb(result.steps))
            added = ", ".join(s["name"] for s in result.steps)
            job.say(f"wf_complete_with_steps -> true: done, and added {added}" if ok
                    else "wf_complete_with_steps refused a stale token")
        elif not job.sql("SELECT wf_complete(%s, %s, %s, %s)", Jsonb(result)):
            job.say("wf_complete refused a stale token")
        elif job.step == "index" or job.step.startswith("publish-"):
            job.say(f"done -> {short(result, 80)}")


# ---------------------------------------------------------------- the steps

def localize(job):
    doc_name = job.payload["doc"]
    doc = DOCUMENTS[doc_name]
    langs = doc["translate_into"]
    events = job.events or {}
    outcomes = {k[len("wf:child:"):]: v for k, v in events.items() if k.startswith("wf:child:")}
    if "wf:children" in events:  # the await's timeout passed
        raise RuntimeError(f"children did not finish in time: {events['wf:children']}")

    if not set(langs) <= outcomes.keys():
        if not outcomes:
            job.say(f"reads {doc_name!r}: {len(doc['sentences'])} sentences, to translate into"
                    f" {', '.join(langs)}")
        started = []
        for lang in langs:
            # Idempotent per (job, name): a later attempt gets the same child back.
            child = job.sql("SELECT wf_start_child(%s, %s, %s, %s, %s)",
                            lang, Jsonb(child_spec(doc_name, lang)))
            if child is None:
                job.say("wf_start_child -> NULL: the job is no longer ours")
                raise Parked()
            started.append(f"{lang} {str(child)[:8]}")
        job.say(f"wf_start_child x{len(langs)} (translate -> proofread each): {', '.join(started)}")
        status = job.sql("SELECT wf_await_children(%s, %s, %s, timeout => '1 minute')")
        job.say(f"wf_await_children -> {status}" + {
            "waiting": ": parked until every child has finished, worker free",
            "pending": ": every child had finished already, ready again at once"}.get(status, ""))
        raise Parked()

    job.say("claimed again, its events hold the children's outcomes:" + "".join(
        f"\n         \"wf:child:{lang}\": status {outcomes[lang]['status']}, results"
        f" {short(outcomes[lang]['results'], 72)}" for lang in langs))
    translations = {lang: o["results"]["proofread"] for lang, o in outcomes.items()
                    if o["status"] == "done"}
    failed = sorted(set(langs) - translations.keys())
    result = {"doc": doc_name, "translations": translations, "failed": failed}
    # One publish step per translation that came back, and an index after
    # them all: steps only known now, added as this step completes.
    publish = [{"name": f"publish-{lang}", "after": ["localize"], "payload": {"lang": lang}}
               for lang in langs if lang in translations]
    index = {"name": "index", "after": [s["name"] for s in publish], "payload": {"doc": doc_name}}
    return WithSteps(result, publish + [index])


def translate(job):
    lang, doc = job.payload["lang"], DOCUMENTS[job.payload["doc"]]
    phrases = PHRASEBOOK[lang]
    n = len(doc["sentences"])
    if job.attempt > 1:
        job.say("claimed again after the failure: starts over")
    job.progress({"sentences_done": 0, "of": n})
    out = []
    for k in range(1, n + 1):
        time.sleep(SECONDS_PER_SENTENCE[lang])
        out.append(phrases[k])
        # Kept in the claim row (unlogged): no WAL per report.
        job.progress({"sentences_done": k, "of": n})
        if lang == FLAKY and job.attempt == 1 and k == 3:
            raise UpstreamError("503 from the translation API")
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


STEPS = {"localize": localize, "translate": translate, "proofread": proofread,
         "publish": publish, "index": index}


# ---------------------------------------------------------------- the driver

def worker_process(name, stop, ready, t0):
    global T0
    T0 = t0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops us
    with psycopg.connect(autocommit=True, application_name=f"pg_wf demo {name}") as conn:
        ready.wait(timeout=30)
        work(conn, name, stop)


SPEC = {"name": "manual-7", "queue": QUEUE,
        "steps": [{"name": "localize", "payload": {"doc": "manual-7"}}]}


class Watcher(threading.Thread):
    """The driver's second connection: prints the children's progress from
    wf.jobs every 0.5 s (when it changed) while the first one waits."""

    QUERY = ("SELECT payload->>'lang', step_name, status, attempt, progress, last_error"
             "  FROM wf.jobs WHERE child_of = %s ORDER BY id")

    def __init__(self, parent_job):
        super().__init__(daemon=True)
        self.parent_job = parent_job
        self.stop = threading.Event()
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
    """The workflow as wf_workflow() describes it, its children's too."""
    wf = conn.execute("SELECT wf_workflow(%s)", (wid,)).fetchone()[0]
    counts = ", ".join(f"{v} {k}" for k, v in wf["counts"].items() if v and k != "steps")
    print(f"  wf_workflow('{wid}'): {wf['name']}, {wf['status']} ({counts})")
    for s in wf["steps"]:
        after = ", ".join(s["after"] or []) or "-"
        after = after if len(after) <= 30 else after[:29] + "…"
        detail = short(s["result"], 46) if s["status"] == "done" else (s["last_error"] or "")
        if s["children"]:
            detail = f"children: {', '.join(c['name'] for c in s['children'])}"
        print(f"    {s['name']:11} {s['status']:9} attempt {s['attempt']}  after {after:30} {detail}")
        kids = s["children"] or []
        for i, c in enumerate(kids):
            child = conn.execute("SELECT wf_workflow(%s)", (c["workflow_id"],)).fetchone()[0]
            steps = ", ".join(f"{cs['name']} {cs['status']}"
                              + (f" (attempt {cs['attempt']}, last error: {short(cs['last_error'], 40)})"
                                 if cs["attempt"] > 1 else "")
                              for cs in child["steps"])
            print(f"      {'└' if i == len(kids) - 1 else '├'} {c['name']} {c['status']:5}"
                  f" {child['name']} (child_of {child['child_of']}): {steps}")
    print(flush=True)
    return wf


def run(conn):
    conn.execute("SELECT wf_configure_queue(%s, backoff_base => '200 ms', backoff_max => '1 s')",
                 (QUEUE,))
    say(f"driver: wf_submit of {SPEC['name']!r}: one step, localize; the rest it decides itself")
    wid = conn.execute("SELECT wf_submit(%s)", (Jsonb(SPEC),)).fetchone()[0]
    localize_id = conn.execute("SELECT id FROM wf.jobs WHERE workflow_id = %s",
                               (wid,)).fetchone()[0]
    say(f"        -> workflow {wid}, localize is job {localize_id}")
    watcher = Watcher(localize_id)
    watcher.start()
    say(f"driver: SELECT * FROM wf_wait_workflow('{str(wid)[:8]}…', '60 s') blocks until it has"
        " finished;")
    say(f"        a 2nd connection prints the children's wf.jobs.progress (WHERE child_of ="
        f" {localize_id})")
    start = time.monotonic()
    status, result, error = conn.execute("SELECT * FROM wf_wait_workflow(%s, '60 s')",
                                         (wid,)).fetchone()
    waited = time.monotonic() - start
    lag_ms = conn.execute("SELECT extract(epoch FROM clock_timestamp() - finished_at) * 1000"
                          "  FROM wf.workflows WHERE workflow_id = %s", (wid,)).fetchone()[0]
    watcher.stop.set()
    watcher.join(timeout=5)
    lag = f", {lag_ms:.0f} ms after the commit that finished it" if lag_ms is not None else ""
    say(f"wf_wait_workflow returned after {waited:.1f} s{lag}: status {status}, error {error or 'NULL'}")
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
           f"wf_wait_workflow: status {status}, the index lists {len(pages)} translated pages")
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
           f"wf_progress: the watcher saw every language part-way ({', '.join(sorted(watcher.partial))}),"
           f" each kept its last report {{\"sentences_done\": {n}, \"of\": {n}}}"
           + (f" -- watcher error: {watcher.error}" if watcher.error else ""))
    added = [s["name"] for s in wf["steps"] if s["name"] != "localize"]
    idx = next((s for s in wf["steps"] if s["name"] == "index"), None)
    report(sorted(added) == sorted([f"publish-{l}" for l in langs] + ["index"])
           and idx is not None and sorted(idx["after"] or []) == sorted(f"publish-{l}" for l in langs)
           and all(s["status"] == "done" for s in wf["steps"]),
           f"wf_complete_with_steps added {len(added)} steps to the running workflow, all done")
    return 0 if ok else 1


def main():
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    ready = ctx.Barrier(WORKERS + 1)

    def too_long(signum, frame):
        raise TimeoutError(f"part 3 took over {HARD_LIMIT} s")

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(HARD_LIMIT)
    with psycopg.connect(autocommit=True, application_name="pg_wf demo translations") as conn:
        if conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (QUEUE,)).fetchone()[0]:
            sys.exit(f"queue {QUEUE!r} already has jobs: run the demo on a fresh database")
        procs = [ctx.Process(target=worker_process, args=(f"t{i + 1}", stop, ready, T0),
                             name=f"t{i + 1}") for i in range(WORKERS)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=30)
            say(f"started {WORKERS} workers on queue {QUEUE!r} (pids"
                f" {', '.join(str(p.pid) for p in procs)})")
            return run(conn)
        except TimeoutError as e:
            say(f"!! giving up: {e}")
            for p in procs:
                p.terminate()
            try:  # it may be inside a statement: cancel that, then close
                conn.cancel()
            finally:
                conn.close()
            return 1
        except BaseException:  # Ctrl-C or an error: stop the workers now
            for p in procs:
                p.terminate()
            raise
        finally:
            signal.alarm(0)
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
