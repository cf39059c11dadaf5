#!/usr/bin/env python3
"""The dashboard in a real headless browser (Debian's chromium, driven over
the DevTools protocol by cdp.py), against a real server.

PG_WF_TEST_DSN: a superuser connection to a database with pg_wf created.
The test seeds it (seed.py), starts `python3 -m pg_wf dashboard` as the
role wf_dash_viewer (no superuser: it administers dash.*, operates
dashro.*), opens each page, clicks, and checks the database after each
action. Every page's console is collected: any error fails the check that
caused it. Screenshots go to tests/artifacts/. Ends with `N passed, M failed`.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))  # clients/python

import psycopg  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

import seed as seeding  # noqa: E402
from cdp import Browser  # noqa: E402

ART = os.path.join(HERE, "artifacts")
DSN = os.environ.get("PG_WF_TEST_DSN", "")

CHECKS: list = []


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn
    return deco


class Ctx:
    pass


C = Ctx()


# ---------------------------------------------------------------- helpers

def db(query, params=None):
    return C.su.execute(query, params or None).fetchall()


def db1(query, params=None):
    rows = db(query, params)
    return next(iter(rows[0].values())) if rows else None


def errors_since(mark, allow=()):
    out = []
    for e in C.browser.errors[mark:]:
        text = f"{e.get('text')} {e.get('url') or ''}"
        if any(re.search(a, text) for a in allow):
            continue
        out.append(e)
    return out


def assert_no_console_errors(mark, allow=()):
    C.browser.pump(0.3)
    errs = errors_since(mark, allow)
    assert not errs, "console errors: " + json.dumps(errs)[:1500]


def js(expr):
    return C.browser.eval(expr)


def wait(expr, timeout=10, what=None):
    return C.browser.wait_for(expr, timeout, what)


def shot(name):
    path = os.path.join(ART, name)
    w, h = C.browser.screenshot(path)
    C.shots.append((path, w, h))


def open_page(fragment, ready_selector, timeout=15):
    mark = len(C.browser.errors)
    C.browser.navigate(C.url + fragment)
    wait(f"document.querySelector({json.dumps(ready_selector)})", timeout, what=ready_selector)
    return mark


def http(path, method="GET", body=None, headers=None):
    req = urllib.request.Request(C.url.rstrip("/") + path, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def banner(kind, timeout=10):
    return wait(f"(() => {{ const b = document.getElementById('banner');"
                f" return !b.hidden && b.classList.contains('{kind}') ? b.textContent : null; }})()",
                timeout, what=f"a {kind} banner")


def dismiss_banner():
    js("document.getElementById('banner').hidden = true")


def graph_nodes(workflow_id):
    return js(f"""Object.fromEntries(Array.from(document.querySelectorAll(
        'svg.dag[data-workflow-id="{workflow_id}"] g.node')).map(g => [g.dataset.step, g.dataset.status]))""")


# ---------------------------------------------------------------- Prometheus text format

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')


def parse_prometheus(text):
    """A strict reader of the text format 0.0.4: returns
    {family: {"type":..., "help":..., "samples": {(name, labels): value}}}."""
    assert text.endswith("\n"), "must end with a newline"
    fams: dict = {}
    current = None
    seen_series = set()
    closed = set()
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                assert METRIC_NAME.match(name), f"line {n}: bad metric name {name!r}"
                f = fams.setdefault(name, {"type": None, "help": None, "samples": {}})
                if parts[1] == "TYPE":
                    assert f["type"] is None, f"line {n}: second TYPE for {name}"
                    assert not f["samples"], f"line {n}: TYPE after samples of {name}"
                    assert len(parts) == 4 and parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), \
                        f"line {n}: bad TYPE line"
                    f["type"] = parts[3]
                else:
                    assert f["help"] is None, f"line {n}: second HELP for {name}"
                    f["help"] = parts[3] if len(parts) == 4 else ""
                if current and current != name:
                    closed.add(current)
                assert name not in closed, f"line {n}: family {name} is not contiguous"
                current = name
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+-?\d+)?$", line)
        assert m, f"line {n}: not a sample: {line!r}"
        name, labels_txt, value = m.group(1), m.group(2), m.group(3)
        labels = []
        if labels_txt and labels_txt != "{}":
            body = labels_txt[1:-1]
            pos = 0
            while pos < len(body):
                lm = LABEL.match(body, pos)
                assert lm, f"line {n}: bad labels {labels_txt!r}"
                labels.append((lm.group(1), lm.group(2)))
                pos = lm.end()
        assert len({k for k, _ in labels}) == len(labels), f"line {n}: repeated label"
        if value in ("NaN", "+Inf", "-Inf"):
            v = float(value.replace("Inf", "inf").replace("NaN", "nan"))
        else:
            v = float(value)  # raises on garbage
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name not in fams and name.endswith(suffix) and name[: -len(suffix)] in fams:
                fam = name[: -len(suffix)]
        assert fam in fams and fams[fam]["type"], f"line {n}: sample of {name} without a TYPE line before it"
        if current and current != fam:
            closed.add(current)
        assert fam not in closed, f"line {n}: family {fam} is not contiguous"
        current = fam
        key = (name, tuple(sorted(labels)))
        assert key not in seen_series, f"line {n}: duplicate series {key}"
        seen_series.add(key)
        if fams[fam]["type"] == "counter":
            assert v >= 0 and not math.isnan(v), f"line {n}: a counter below 0"
        fams[fam]["samples"][key] = v
    return fams


def sample(fams, name, **labels):
    for fam in fams.values():
        v = fam["samples"].get((name, tuple(sorted(labels.items()))))
        if v is not None:
            return v
    return None


# ---------------------------------------------------------------- setup

def setup():
    os.makedirs(ART, exist_ok=True)
    C.shots = []
    C.su = psycopg.connect(DSN, autocommit=True, row_factory=dict_row)
    C.seed = seeding.seed(DSN)
    C.has_metrics = bool(db1("SELECT to_regclass('wf.metrics') IS NOT NULL"))
    C.has_enable = bool(db1("SELECT to_regproc('wf_enable_schedule') IS NOT NULL"))
    # The dashboard logs in as the seeded role; where the server's
    # pg_hba.conf does not let it in with its password, it runs in a
    # superuser's session that SET ROLE to it (the same rights).
    params = psycopg.conninfo.conninfo_to_dict(DSN)
    params.update(user=C.seed["role"], password=C.seed["password"])
    role_dsn = psycopg.conninfo.make_conninfo(**params)
    try:
        psycopg.connect(role_dsn).close()
        C.how = "logged in as " + C.seed["role"]
    except psycopg.OperationalError:
        params = psycopg.conninfo.conninfo_to_dict(DSN)
        params["options"] = (params.get("options", "") + f" -c role={C.seed['role']}").strip()
        role_dsn = psycopg.conninfo.make_conninfo(**params)
        C.how = "a superuser session with SET ROLE " + C.seed["role"]
    env = dict(os.environ, PYTHONPATH=os.path.abspath(os.path.join(HERE, "..", "..", "..")) +
               (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    C.dash_log = open(os.path.join(ART, "dashboard.log"), "w")
    C.dash = subprocess.Popen([sys.executable, "-m", "pg_wf", "-v", "dashboard", "--dsn", role_dsn, "--port", "0"],
                              stdout=subprocess.PIPE, stderr=C.dash_log, text=True, env=env)
    line = C.dash.stdout.readline()
    m = re.search(r"on (http://\S+/) ", line)
    if not m:
        raise RuntimeError(f"the dashboard did not start: {line!r}; see {C.dash_log.name}")
    C.url = m.group(1)
    C.browser = Browser(width=1400, height=900)
    print(f"# dashboard {C.url} ({C.how}); seeded run {C.seed['run']}; chromium {C.browser.binary}", flush=True)


def teardown():
    for name in ("browser",):
        b = getattr(C, name, None)
        if b:
            b.close()
    d = getattr(C, "dash", None)
    if d and d.poll() is None:
        d.terminate()
        try:
            d.wait(10)
        except subprocess.TimeoutExpired:
            d.kill()
    if getattr(C, "seed", None):
        C.seed["conn"].close()
        try:  # the seeded schedules would go on firing into dash.emails
            C.su.execute("SELECT wf_unschedule('dash-nightly'), wf_unschedule('dash-hourly')")
        except psycopg.Error:
            pass
    if getattr(C, "su", None):
        C.su.close()


# ---------------------------------------------------------------- checks

@check("queues page loads without console errors and shows only the role's queues, counts and charts")
def _():
    mark = open_page("#/queues", 'tr[data-queue="dash.emails"]')
    wait("document.querySelector('#who b')", what="the role in the header")
    who = js("document.getElementById('who').textContent")
    assert C.seed["role"] in who and "superuser" not in who, who
    queues = js("Array.from(document.querySelectorAll('#queues-table tr[data-queue]')).map(r => r.dataset.queue)")
    assert "dash.emails" in queues and "dashro.reports" in queues and "dash.flow" in queues, queues
    assert not any(q.startswith("dashhidden.") for q in queues), f"a queue without rights is shown: {queues}"
    failed = db1("SELECT failed FROM wf.queue_stats WHERE queue = 'dash.emails'")
    chip = js("document.querySelector('tr[data-queue=\"dash.emails\"] .chip[data-status=failed]').dataset.count")
    assert int(chip) == failed, (chip, failed)
    done_total = js("Number(document.querySelector('tr[data-queue=\"dash.emails\"] svg.spark.done').dataset.total)")
    db_done = db1("SELECT count(*) FROM wf.jobs WHERE queue = 'dash.emails' AND status = 'done'"
                  " AND finished_at >= date_trunc('minute', now()) - interval '59 minutes'")
    assert done_total == db_done and done_total >= 90, (done_total, db_done)
    bars = js("document.querySelectorAll('tr[data-queue=\"dash.emails\"] svg.spark.done rect.bar').length")
    assert bars >= 10, f"the throughput chart has {bars} bars"
    fbars = js("document.querySelectorAll('tr[data-queue=\"dash.emails\"] svg.spark.failed rect.bar').length")
    assert fbars >= 1, "the failures chart is empty"
    age = js("document.querySelector('tr[data-queue=\"dash.emails\"] td.age').dataset.age")
    assert age and float(age) > 0, f"oldest ready age {age!r}"
    if C.has_metrics:
        since = js("document.querySelector('tr[data-queue=\"dash.emails\"] .since').textContent")
        assert "enqueued" in since, since
    assert_no_console_errors(mark)
    shot("queues.png")


@check("/metrics is valid Prometheus text: counters of wf.metrics, gauges of wf.queue_stats, live values")
def _():
    status, headers, text = http("/metrics")
    assert status == 200, status
    ctype = headers.get("Content-Type", "")
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    with open(os.path.join(ART, "metrics.txt"), "w") as f:
        f.write(text)
    fams = parse_prometheus(text)
    try:  # the reference parser too, where Debian's python3-prometheus-client is installed
        from prometheus_client.parser import text_string_to_metric_families
        names = {f.name for f in text_string_to_metric_families(text)}
        assert "pg_wf_jobs" in names, names
    except ImportError:
        pass
    assert sample(fams, "pg_wf_up") == 1
    for st in ("pending", "failed", "done", "running"):
        want = db1(f"SELECT {st} FROM wf.queue_stats WHERE queue = 'dash.emails'")
        got = sample(fams, "pg_wf_jobs", queue="dash.emails", status=st)
        assert got == want, (st, got, want)
    assert fams["pg_wf_jobs"]["type"] == "gauge"
    assert sample(fams, "pg_wf_oldest_ready_age_seconds", queue="dash.emails") > 0
    assert "dashhidden" not in text, "a queue the role cannot see is in /metrics"
    if C.has_metrics:
        for name in ("pg_wf_jobs_enqueued_total", "pg_wf_jobs_claimed_total", "pg_wf_jobs_completed_total",
                     "pg_wf_jobs_failed_total", "pg_wf_jobs_retried_total", "pg_wf_jobs_recovered_total",
                     "pg_wf_jobs_cancelled_total", "pg_wf_claim_waits_total", "pg_wf_claim_wait_seconds_total"):
            assert fams.get(name, {}).get("type") == "counter", f"{name} missing or not a counter"
        before = sample(fams, "pg_wf_jobs_enqueued_total", queue="dash.emails")
        if before is None and db1("SELECT count(*) FROM wf.metrics") >= db1("SELECT current_setting('wf.metrics_slots')::int"):
            print("#   (wf.metrics_slots is full on this server: dash.emails is not counted)")
            return
        assert before is not None and before >= 100, before
        db("SELECT wf_enqueue('dash.emails', '{\"to\": \"metrics@example.com\"}', run_at => now() + interval '1 day')")
        after = sample(parse_prometheus(http("/metrics")[2]), "pg_wf_jobs_enqueued_total", queue="dash.emails")
        assert after == before + 1, (before, after)
    else:
        print("#   (no wf.metrics on this server: counters not checked)")


@check("jobs page: filter by queue, status and error text; a job's payload, error and timings")
def _():
    mark = open_page("#/jobs?queue=dash.emails&status=failed", "#jobs-table tr.job")
    C.browser.type_text("#f-q", "MAILBOX")
    C.browser.key("Enter", "Enter", 13)
    wait("location.hash.includes('q=MAILBOX')", what="the filter in the URL")
    mailbox = C.seed["failed"]["no such mailbox"]
    wait("(() => { const r = Array.from(document.querySelectorAll('#jobs-table tr.job'));"
         " return r.length && r.every(x => /mailbox/i.test(x.querySelector('td.err').textContent)); })()",
         what="only jobs whose error has 'mailbox'")
    ids = js("Array.from(document.querySelectorAll('#jobs-table tr.job')).map(r => r.dataset.job)")
    for i in mailbox:
        assert f"dash.emails:{i}" in ids, (i, ids)
    n = db1("SELECT count(*) FROM wf.jobs WHERE queue = 'dash.emails' AND status = 'failed'"
            " AND last_error ILIKE '%mailbox%'")
    total = js("Number(document.getElementById('match-count').dataset.total)")
    assert total == n, (total, n)
    # open one job: a real click on its row
    C.browser.click(f'#jobs-table tr.job[data-job="dash.emails:{mailbox[0]}"] td.err')
    wait(f"document.querySelector('#job-detail[data-job=\"dash.emails:{mailbox[0]}\"] #job-payload')",
         what="the job's detail")
    payload = js("document.getElementById('job-payload').textContent")
    assert json.loads(payload)["to"].startswith("bad"), payload
    err = js("document.getElementById('job-last-error').textContent")
    assert "no such mailbox" in err, err
    detail = js("document.getElementById('job-detail').textContent")
    for word in ("attempts", "created", "started", "finished", "Payload", "Result"):
        assert word.lower() in detail.lower(), f"{word} missing in the detail"
    assert_no_console_errors(mark)
    shot("jobs.png")


@check("a retry clicked in the page changes the job in the database")
def _():
    mark = len(C.browser.errors)
    jid = C.seed["failed"]["no such mailbox"][0]
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [jid]) == "failed"
    C.browser.click(f'#job-detail button[data-action="retry"][data-job="dash.emails:{jid}"]')
    msg = banner("ok")
    assert "retried" in msg, msg
    row = db("SELECT status, attempt, max_attempts FROM wf.jobs WHERE id = %s", [jid])[0]
    assert row["status"] == "pending", row
    wait(f"document.querySelector('#job-detail[data-job=\"dash.emails:{jid}\"]').dataset.status === 'pending'",
         what="the detail showing pending")
    # the other mailbox failure is untouched
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [C.seed["failed"]["no such mailbox"][1]]) == "failed"
    dismiss_banner()
    assert_no_console_errors(mark)


@check("bulk retry of the filtered set (error text) retries exactly those jobs")
def _():
    mark = open_page("#/jobs?queue=dash.emails&status=failed&q=smtp%20451", "#bulk-retry")
    want = db1("SELECT count(*) FROM wf.jobs WHERE queue = 'dash.emails' AND status = 'failed'"
               " AND last_error ILIKE '%smtp 451%'")
    assert want >= 3, want
    C.browser.click("#bulk-retry")
    C.browser.click("#bulk-confirm")
    msg = banner("ok")
    assert msg.startswith(f"{want} job"), (msg, want)
    for i in C.seed["failed"]["SMTP 451 try later"]:
        assert db1("SELECT status FROM wf.jobs WHERE id = %s", [i]) == "pending", i
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [C.seed["failed"]["no such mailbox"][1]]) == "failed"
    wait("Number(document.getElementById('match-count').dataset.total) === 0", what="the list emptied")
    dismiss_banner()
    assert_no_console_errors(mark)


@check("bulk cancel of a filtered set (queue + status) cancels those jobs and nothing else")
def _():
    mark = open_page("#/jobs?queue=dash.bulk&status=pending", "#bulk-cancel")
    total = js("Number(document.getElementById('match-count').dataset.total)")
    assert total == db1("SELECT count(*) FROM wf.jobs WHERE queue = 'dash.bulk' AND status = 'pending'")
    C.browser.click("#bulk-cancel")
    confirm = js("document.querySelector('#bulk .confirm').textContent")
    assert "Cancel" in confirm, confirm
    C.browser.click("#bulk-confirm")
    msg = banner("ok")
    assert "cancelled" in msg, msg
    got = {r["id"]: r["status"] for r in db("SELECT id, status FROM wf.jobs WHERE id = ANY(%s)", [C.seed["bulk"]])}
    assert set(got.values()) == {"cancelled"}, got
    still = {r["status"] for r in db("SELECT status FROM wf.jobs WHERE id = ANY(%s)", [C.seed["pending"]])}
    assert still == {"pending"}, f"jobs outside the filter changed: {still}"
    dismiss_banner()
    assert_no_console_errors(mark)


@check("workflows list shows the workflow with its progress")
def _():
    wf = C.seed["workflow"]
    mark = open_page("#/workflows", f'tr[data-workflow-id="{wf}"]')
    st = js(f"document.querySelector('tr[data-workflow-id=\"{wf}\"]').dataset.status")
    assert st == "running", st
    segs = js(f"Array.from(document.querySelectorAll('tr[data-workflow-id=\"{wf}\"] .stackbar .seg')).map(s => s.dataset.status)")
    assert set(segs) == {"done", "waiting", "failed", "blocked"}, segs
    text = js(f"document.querySelector('tr[data-workflow-id=\"{wf}\"]').textContent")
    assert "1 / 5 done" in text and "1 failed" in text, text
    assert not js(f"document.querySelector('tr[data-workflow-id=\"{C.seed['children']['fr']}\"]')"), \
        "child workflows are listed although 'include child workflows' is off"
    assert_no_console_errors(mark)
    shot("workflows.png")


@check("workflow graph: steps coloured by status, edges from 'after', what each waits for, child workflows")
def _():
    wf = C.seed["workflow"]
    mark = len(C.browser.errors)
    C.browser.click(f'tr[data-workflow-id="{wf}"] a')
    wait(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] g.node')", what="the graph")
    nodes = graph_nodes(wf)
    want = {s["name"]: s["status"] for s in db1("SELECT wf_workflow(%s::uuid) -> 'steps'", [wf])}
    assert nodes == want, (nodes, want)
    assert nodes == {"fetch": "done", "translate": "waiting", "notify": "failed", "review": "blocked",
                     "publish": "blocked"}, nodes
    edges = js(f"Array.from(document.querySelectorAll('svg.dag[data-workflow-id=\"{wf}\"] path.edge'))"
               ".map(p => p.dataset.from + '>' + p.dataset.to).sort()")
    assert edges == sorted(["fetch>translate", "fetch>notify", "translate>review", "review>publish"]), edges
    done_edge = js(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] path.edge[data-from=fetch][data-to=translate]').classList.contains('done')")
    assert done_edge, "the edge after a done step is not drawn as done"
    # every node has a distinct place: no two overlap
    boxes = js(f"Array.from(document.querySelectorAll('svg.dag[data-workflow-id=\"{wf}\"] g.node rect.box'))"
               ".map(r => {{ const b = r.getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; }})")
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1], \
                f"nodes overlap: {a} {b}"
    note = lambda step: js(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] g.node[data-step={step}] text.note').textContent")  # noqa: E731
    assert note("review") == "waits for translate", note("review")
    assert "child workflow" in note("translate"), note("translate")
    assert note("notify").startswith("webhook https://hooks.exam"), note("notify")
    tip = js(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] g.node[data-step=notify] title').textContent")
    assert "answered 500" in tip, tip
    kids = js(f"Object.fromEntries(Array.from(document.querySelectorAll('svg.dag[data-workflow-id=\"{wf}\"] g.node[data-step=translate] circle.kid')).map(c => [c.dataset.childName, c.dataset.status]))")
    assert kids == {"de": "done", "fr": "running", "es": "failed"}, kids
    # the child workflows, nested below, each with its own graph
    for lang, status in (("de", "done"), ("fr", "running"), ("es", "failed")):
        cid = C.seed["children"][lang]
        got = js(f"document.querySelector('.childwf[data-workflow-id=\"{cid}\"]')?.dataset.status")
        assert got == status, (lang, got)
    fr = graph_nodes(C.seed["children"]["fr"])
    assert fr == {"translate": "running", "proofread": "blocked"}, fr
    assert js(f"!!document.querySelector('svg.dag[data-workflow-id=\"{C.seed['children']['fr']}\"] g.node[data-step=translate] rect.pbar')"), \
        "no progress bar on the running step that reported progress"
    es = graph_nodes(C.seed["children"]["es"])
    assert es == {"translate": "failed", "proofread": "cancelled"}, es
    # a click on a step shows its details
    C.browser.click(f'svg.dag[data-workflow-id="{wf}"] g.node[data-step="notify"]')
    wait("document.getElementById('step-detail').textContent.includes('answered 500')", what="the step's detail")
    assert_no_console_errors(mark)
    shot("workflow.png")


@check("the workflow graph follows the database live (polling), children's outcomes included")
def _():
    mark = len(C.browser.errors)
    conn = C.seed["conn"]
    fr = C.seed["fr_claim"]
    fr_wf = C.seed["children"]["fr"]
    wf = C.seed["workflow"]
    assert conn.execute("SELECT wf_complete('dash.child', %s, %s, '{\"text\": \"Manuel\"}')",
                        [fr["id"], fr["attempt"]]).fetchone()
    wait(f"(() => {{ const n = document.querySelector('svg.dag[data-workflow-id=\"{fr_wf}\"] g.node[data-step=proofread]');"
         " return n && n.dataset.status === 'pending'; })()", timeout=8, what="fr's proofread pending in the page")
    assert graph_nodes(fr_wf)["translate"] == "done"
    c = conn.execute("SELECT id, attempt FROM wf_claim('dash.child', worker => 'proofreader-2')").fetchone()
    assert c["id"] == C.seed["child_jobs"][("fr", "proofread")], c
    conn.execute("SELECT wf_complete('dash.child', %s, %s, '{\"ok\": true}')", [c["id"], c["attempt"]])
    # every child has finished: the server delivers the outcomes and wakes translate
    wait(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] circle.kid[data-child-name=fr]')?.dataset.status === 'done'",
         timeout=10, what="the fr dot turning done")
    wait(f"document.querySelector('svg.dag[data-workflow-id=\"{wf}\"] g.node[data-step=translate]')?.dataset.status === 'pending'",
         timeout=10, what="translate ready again once its children finished")
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [C.seed["steps"]["translate"]]) == "pending"
    assert_no_console_errors(mark)


@check("pause and resume a queue from the queues page")
def _():
    mark = open_page("#/queues", 'button[data-action="pause"][data-queue="dash.emails"]')

    def paused():  # verification as superuser (no view shows it to the dashboard's role)
        return db1("SELECT paused FROM wf.queue_config WHERE queue = 'dash.emails'")
    assert paused() is False
    C.browser.click('button[data-action="pause"][data-queue="dash.emails"]')
    assert "paused" in banner("ok")
    assert paused() is True
    row = 'document.querySelector(\'tr[data-queue="dash.emails"]\')'
    if js(f"{row}.dataset.paused !== undefined"):  # a wf.queue_stats that shows `paused`
        wait(f"{row}.dataset.paused === 'true' && !!{row}.querySelector('button[data-action=resume]')"
             f" && !{row}.querySelector('button[data-action=pause]')", what="the row showing paused")
    n = db1("SELECT count(*) FROM wf_claim('dash.emails', max_jobs => 5)")
    assert n == 0, f"a paused queue handed out {n} jobs"
    dismiss_banner()
    C.browser.click('button[data-action="resume"][data-queue="dash.emails"]')
    assert "resumed" in banner("ok")
    assert paused() is False
    dismiss_banner()
    assert_no_console_errors(mark)


@check("an action the role may not do shows the server's 42501 and changes nothing; one it may do works")
def _():
    mark = len(C.browser.errors)
    C.browser.click('button[data-action="pause"][data-queue="dashro.reports"]')
    text = banner("error")
    assert js("document.getElementById('banner').dataset.sqlstate") == "42501", text
    assert "permission denied" in text.lower(), text
    assert db1("SELECT paused FROM wf.queue_config WHERE queue = 'dashro.reports'") is False
    # the 403 of that request is the one console error allowed
    assert_no_console_errors(mark, allow=[r"status of 403.*/api/queue/pause"])
    dismiss_banner()
    jid = C.seed["ro_failed"]
    mark = open_page(f"#/jobs?queue=dashro.reports&job=dashro.reports:{jid}",
                     f'#job-detail button[data-action="retry"][data-job="dashro.reports:{jid}"]')
    C.browser.click(f'#job-detail button[data-action="retry"][data-job="dashro.reports:{jid}"]')
    banner("ok")
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [jid]) == "pending"
    dismiss_banner()
    assert_no_console_errors(mark)


@check("schedules: next and last run shown; disable and enable a schedule")
def _():
    mark = open_page("#/schedules", 'tr[data-schedule="dash-nightly"]')
    text = js("document.querySelector('tr[data-schedule=\"dash-nightly\"]').textContent")
    assert "30 2 * * *" in text and "dash.emails" in text, text
    assert "02:30:00 UTC" in text, f"next run not shown: {text}"
    if not C.has_enable:
        print("#   (no wf_enable_schedule on this server: toggle not checked)")
        assert_no_console_errors(mark)
        shot("schedules.png")
        return
    assert js("document.querySelector('tr[data-schedule=\"dash-nightly\"]').dataset.enabled") == "true"
    C.browser.click('button[data-action="disable"][data-schedule="dash-nightly"]')
    assert "disabled" in banner("ok")
    assert db1("SELECT enabled FROM wf.schedules WHERE name = 'dash-nightly'") is False
    wait("document.querySelector('tr[data-schedule=\"dash-nightly\"]').dataset.enabled === 'false'",
         what="the row showing disabled")
    dismiss_banner()
    shot("schedules.png")
    C.browser.click('button[data-action="enable"][data-schedule="dash-nightly"]')
    assert "enabled" in banner("ok")
    assert db1("SELECT enabled FROM wf.schedules WHERE name = 'dash-nightly'") is True
    wait("document.querySelector('tr[data-schedule=\"dash-nightly\"]').dataset.enabled === 'true'",
         what="the row showing enabled")
    dismiss_banner()
    assert_no_console_errors(mark)


@check("actions need POST, the page's CSRF token and this host; reads are GET")
def _():
    body = json.dumps({"queue": "dash.emails", "id": C.seed["failed"]["no such mailbox"][1]}).encode()
    json_h = {"Content-Type": "application/json"}
    s, _, out = http("/api/job/retry", "POST", body, json_h)
    assert s == 403 and "CSRF" in out, (s, out)
    s, _, out = http("/api/job/retry", "POST", body, dict(json_h, **{"X-CSRF-Token": "wrong"}))
    assert s == 403, (s, out)
    s, _, page = http("/")
    token = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
    s, _, out = http("/api/job/retry", "POST", body, dict(json_h, **{"X-CSRF-Token": token, "Origin": "http://evil.example"}))
    assert s == 403 and "cross-origin" in out, (s, out)
    s, _, out = http("/api/job/retry", "GET")
    assert s == 405, (s, out)
    s, _, out = http("/api/queues", headers={"Host": "evil.example"})
    assert s == 421, (s, out)
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [C.seed["failed"]["no such mailbox"][1]]) == "failed"
    s, _, out = http("/api/job/retry", "POST", body, dict(json_h, **{"X-CSRF-Token": token}))
    assert s == 200 and json.loads(out)["ok"] is True, (s, out)
    assert db1("SELECT status FROM wf.jobs WHERE id = %s", [C.seed["failed"]["no such mailbox"][1]]) == "pending"
    assert C.url.startswith("http://127.0.0.1:"), C.url


@check("the Prometheus renderer escapes label values and keeps the format with odd queue names")
def _():
    from pg_wf.dashboard import metrics as prom
    text = prom.render([{"queue": 'we"ird\\q\nx', "pending": 1, "failed": 0, "oldest_ready_age": None,
                         "rate_left": None}],
                       [{"queue": 'we"ird\\q\nx', "enqueued": 3, "claim_wait_seconds": 0.25}])
    fams = parse_prometheus(text)
    assert sample(fams, "pg_wf_jobs", queue='we\\"ird\\\\q\\nx', status="pending") == 1, text
    assert sample(fams, "pg_wf_jobs_enqueued_total", queue='we\\"ird\\\\q\\nx') == 3
    assert sample(fams, "pg_wf_claim_wait_seconds_total", queue='we\\"ird\\\\q\\nx') == 0.25
    down = parse_prometheus(prom.render(None, None, error="connection refused"))
    assert sample(down, "pg_wf_up") == 0


# ---------------------------------------------------------------- runner

def main() -> int:
    if not DSN:
        print("PG_WF_TEST_DSN is not set (a superuser connection to a database with pg_wf)")
        print(f"0 passed, {len(CHECKS)} failed")
        return 1
    passed = failed = 0
    try:
        setup()
    except Exception:
        traceback.print_exc()
        print(f"not ok - setup (seed, dashboard, chromium): every check fails")
        teardown()
        print(f"0 passed, {len(CHECKS)} failed")
        return 1
    try:
        for name, fn in CHECKS:
            t0 = time.monotonic()
            try:
                fn()
                passed += 1
                print(f"ok - {name} ({time.monotonic() - t0:.1f} s)", flush=True)
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"not ok - {name}: {type(e).__name__}: {e}", flush=True)
                traceback.print_exc(limit=3, file=sys.stdout)
                try:
                    C.browser.screenshot(os.path.join(ART, f"failed-{passed + failed:02d}.png"))
                except Exception:  # noqa: BLE001
                    pass
    finally:
        console = getattr(getattr(C, "browser", None), "console", [])
        with open(os.path.join(ART, "console.log"), "w") as f:
            for e in console:
                f.write(json.dumps(e) + "\n")
        teardown()
    for path, w, h in getattr(C, "shots", []):
        print(f"# screenshot {os.path.relpath(path)} ({w}x{h}, {os.path.getsize(path) // 1024} kB)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
