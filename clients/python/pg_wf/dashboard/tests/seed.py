"""Seeds a database for the dashboard's browser test (and for trying the
dashboard by hand): `python3 seed.py DSN` as a superuser.

Everything goes through pg_wf's SQL API, except one thing a test cannot wait
an hour for: the finish times of the 'done' jobs of dash.emails are spread
over the last hour (an UPDATE of wf.job as superuser), so that the charts
have something to show.

What it makes (queue names start with dash., dashro., dashhidden.):
- dash.emails: done jobs over the last hour, failed jobs ('SMTP 451 try
  later' x3, 'no such mailbox' x2), pending ones;
- dash.bulk: 6 pending jobs for the bulk cancel;
- dash.flow + dash.child: the workflow "manual-<run>": fetch (done) ->
  translate (waiting for 3 child workflows: de done, fr running with
  progress, es failed) -> review (blocked) -> publish (blocked); notify
  (failed) after fetch. Plus a finished workflow "report-<run>".
- dashro.reports: a failed job, in a queue the dashboard's role may only
  operate (retry, cancel), not administer (pause: 42501);
- dashhidden.q: a job in a queue the role holds no right on (never shown);
- schedules dash-nightly and dash-hourly (queue dash.emails).
The role wf_dash_viewer (LOGIN, no superuser) administers dash.*, operates
dashro.*; the dashboard runs as it.

The connection that seeds keeps the claim of the fr child's running step:
keep it open while the test runs (a closed session's job is recovered).
"""

from __future__ import annotations

import random
import secrets
import sys
import time
import uuid

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

ROLE = "wf_dash_viewer"


def seed(dsn: str) -> dict:
    run = uuid.uuid4().hex[:6]
    conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
    x = conn.execute
    password = secrets.token_hex(12)
    if not x("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
        x(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER PASSWORD '{password}'")
    else:
        x(f"ALTER ROLE {ROLE} LOGIN NOSUPERUSER PASSWORD '{password}'")
    x("SELECT wf_grant(%s, 'administer', 'dash.*')", [ROLE])
    x("SELECT wf_grant(%s, 'operate', 'dashro.*')", [ROLE])
    x(f"GRANT CONNECT ON DATABASE {psycopg.sql.Identifier(conn.info.dbname).as_string(conn)} TO {ROLE}")
    for q in ("dash.emails", "dash.bulk", "dash.flow", "dash.child", "dashro.reports", "dashhidden.q"):
        x("SELECT wf_configure_queue(%s, paused => false, max_attempts => 3)", [q])
    x("SELECT wf_configure_queue('dash.emails', max_running => 100000)")  # 0 is refused: no way to remove it
    # What an earlier run left unfinished goes (claims below must find only this run's jobs).
    x("SELECT count(wf_cancel(queue, id)) FROM wf.jobs"
      " WHERE (queue LIKE 'dash.%%' OR queue LIKE 'dashro.%%' OR queue LIKE 'dashhidden.%%')"
      "   AND status IN ('blocked', 'pending', 'waiting', 'running') AND NOT cancel_requested")

    # dash.emails: done jobs over the last hour
    rnd = random.Random(7)
    done_ids = [r["id"] for r in x("SELECT id FROM wf_enqueue_batch('dash.emails', %s) AS id",
                                   [Jsonb([{"to": f"user{i}@example.com", "run": run} for i in range(90)])])]
    claimed = x("SELECT id, attempt FROM wf_claim('dash.emails', worker => 'seed-mailer', max_jobs => 90)").fetchall()
    x("SELECT count(*) FROM wf_complete_many('dash.emails', %s, %s)",
      [[r["id"] for r in claimed], [r["attempt"] for r in claimed]])
    minutes = [min(58, int(rnd.expovariate(1 / 14))) for _ in done_ids]  # inside the charts' hour
    x("""UPDATE wf.job j SET finished_at = now() - make_interval(mins => m.mins, secs => m.secs),
                          started_at = now() - make_interval(mins => m.mins, secs => m.secs + 2),
                          created_at = now() - make_interval(mins => m.mins, secs => m.secs + 5)
           FROM unnest(%s::bigint[], %s::int[], %s::int[]) AS m(id, mins, secs)
          WHERE j.queue = 'dash.emails' AND j.id = m.id""",
      [done_ids, minutes, [rnd.randint(0, 59) for _ in done_ids]])

    # dash.emails: failed jobs (permanent failures, so they stay failed)
    failed = {}
    for i, err in enumerate(["SMTP 451 try later"] * 3 + ["no such mailbox"] * 2):
        jid = x("SELECT wf_enqueue('dash.emails', %s) AS id", [Jsonb({"to": f"bad{i}@example.com", "run": run})]).fetchone()["id"]
        c = x("SELECT id, attempt FROM wf_claim('dash.emails', worker => 'seed-mailer')").fetchone()
        assert c["id"] == jid, (c, jid)
        x("SELECT wf_fail('dash.emails', %s, %s, %s, permanent => true)", [jid, c["attempt"], f"{err} (attempt {c['attempt']})"])
        failed.setdefault(err, []).append(jid)
    pending = [r["id"] for r in x("SELECT id FROM wf_enqueue_batch('dash.emails', %s) AS id",
                                  [Jsonb([{"to": f"later{i}@example.com"} for i in range(4)])])]
    x("SELECT wf_enqueue('dash.emails', '{\"to\": \"future@example.com\"}', run_at => now() + interval '2 hours')")
    # mark the failures over the last hour too (the failures chart)
    x("""UPDATE wf.job SET finished_at = now() - make_interval(mins => (id %% 50)::int),
                          started_at = now() - make_interval(mins => (id %% 50)::int, secs => 3),
                          created_at = now() - make_interval(mins => (id %% 50)::int, secs => 4)
          WHERE queue = 'dash.emails' AND id = ANY(%s)""", [sum(failed.values(), [])])

    # dash.bulk: pending jobs for the bulk cancel
    bulk = [r["id"] for r in x("SELECT id FROM wf_enqueue_batch('dash.bulk', %s) AS id",
                               [Jsonb([{"n": i, "run": run} for i in range(6)])])]

    # dashro.reports: a failed job the role may retry; dashhidden.q: invisible
    x("SELECT wf_enqueue('dashro.reports', '{\"report\": \"q3\"}')")
    c = x("SELECT id, attempt FROM wf_claim('dashro.reports')").fetchone()
    x("SELECT wf_fail('dashro.reports', %s, %s, 'renderer crashed', permanent => true)", [c["id"], c["attempt"]])
    ro_failed = c["id"]
    x("SELECT wf_enqueue('dashhidden.q', '{\"secret\": true}')")

    # a finished workflow
    done_wf = x("SELECT wf_submit(%s) AS id", [Jsonb({"name": f"report-{run}", "queue": "dash.flow", "steps": [
        {"name": "collect"}, {"name": "render", "after": ["collect"]}]})]).fetchone()["id"]
    for _ in range(2):
        c = x("SELECT id, attempt FROM wf_claim('dash.flow')").fetchone()
        x("SELECT wf_complete('dash.flow', %s, %s, '{\"ok\": true}')", [c["id"], c["attempt"]])

    # the workflow with children
    wf = x("SELECT wf_submit(%s) AS id", [Jsonb({"name": f"manual-{run}", "queue": "dash.flow", "key": f"manual-{run}", "steps": [
        {"name": "fetch", "payload": {"doc": "manual.md"}},
        {"name": "translate", "after": ["fetch"]},
        {"name": "notify", "after": ["fetch"]},
        {"name": "review", "after": ["translate"]},
        {"name": "publish", "after": ["review"]}]})]).fetchone()["id"]
    steps = {r["step_name"]: r["id"] for r in x("SELECT step_name, id FROM wf.jobs WHERE workflow_id = %s", [wf])}
    c = x("SELECT id, attempt FROM wf_claim('dash.flow')").fetchone()
    assert c["id"] == steps["fetch"]
    x("SELECT wf_complete('dash.flow', %s, %s, '{\"pages\": 12}')", [c["id"], c["attempt"]])
    cl = {r["id"]: r for r in x("SELECT id, attempt FROM wf_claim('dash.flow', max_jobs => 2)").fetchall()}
    assert set(cl) == {steps["translate"], steps["notify"]}, cl
    n = cl[steps["notify"]]
    x("SELECT wf_fail('dash.flow', %s, %s, 'webhook https://hooks.example.com answered 500', permanent => true)",
      [n["id"], n["attempt"]])
    t = cl[steps["translate"]]
    children = {}
    for lang in ("de", "fr", "es"):
        children[lang] = x("SELECT wf_start_child('dash.flow', %s, %s, %s, %s) AS id", [t["id"], t["attempt"], lang, Jsonb(
            {"name": f"translate-{lang}", "queue": "dash.child", "steps": [
                {"name": "translate", "payload": {"lang": lang}},
                {"name": "proofread", "after": ["translate"], "payload": {"lang": lang}}]})]).fetchone()["id"]
    assert x("SELECT wf_await_children('dash.flow', %s, %s) AS s", [t["id"], t["attempt"]]).fetchone()["s"] == "waiting"
    child_jobs = {(r["lang"], r["step_name"]): r["id"] for r in x(
        "SELECT payload->>'lang' AS lang, step_name, id FROM wf.jobs WHERE workflow_id = ANY(%s::uuid[])",
        [list(children.values())])}
    claims = {r["id"]: r for r in x("SELECT id, attempt FROM wf_claim('dash.child', worker => 'translator-1', max_jobs => 3)")}
    de, fr, es = (claims[child_jobs[(lang, "translate")]] for lang in ("de", "fr", "es"))
    x("SELECT wf_complete('dash.child', %s, %s, '{\"text\": \"Handbuch\"}')", [de["id"], de["attempt"]])
    x("SELECT wf_fail('dash.child', %s, %s, 'model overloaded: 529', permanent => true)", [es["id"], es["attempt"]])
    x("SELECT wf_progress('dash.child', %s, %s, '{\"sentences\": 3, \"of\": 10}')", [fr["id"], fr["attempt"]])
    c = x("SELECT id, attempt FROM wf_claim('dash.child', worker => 'proofreader-1')").fetchone()
    assert c["id"] == child_jobs[("de", "proofread")], c
    x("SELECT wf_complete('dash.child', %s, %s, '{\"ok\": true}')", [c["id"], c["attempt"]])

    x("SELECT wf_configure_queue('dash.emails', max_running => 8)")  # a limit to show

    # schedules
    x("SELECT wf_schedule('dash-nightly', '30 2 * * *', 'dash.emails', '{\"kind\": \"digest\"}')")
    x("SELECT wf_schedule('dash-hourly', '@hourly', 'dash.emails', '{\"kind\": \"hourly\"}')")
    if x("SELECT to_regproc('wf_enable_schedule') IS NOT NULL AS ok").fetchone()["ok"]:
        x("SELECT wf_enable_schedule('dash-nightly', true)")
        x("SELECT wf_enable_schedule('dash-hourly', true)")

    # the children's outcomes reach the parent at once or by the next sweep
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = {r["name"]: r["status"] for r in x("SELECT c->>'name' AS name, c->>'status' AS status FROM wf.jobs j,"
                                                 " jsonb_array_elements((wf_workflow(j.workflow_id)->'steps')) s,"
                                                 " jsonb_array_elements(s->'children') c"
                                                 " WHERE j.id = %s AND s->>'name' = 'translate'", [t["id"]])}
        if st == {"de": "done", "fr": "running", "es": "failed"}:
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"child statuses not as expected: {st}")

    return {
        "run": run, "conn": conn, "role": ROLE, "password": password,
        "failed": failed, "pending": pending, "bulk": bulk, "ro_failed": ro_failed,
        "workflow": str(wf), "done_workflow": str(done_wf), "steps": steps,
        "children": {k: str(v) for k, v in children.items()}, "child_jobs": child_jobs,
        "fr_claim": fr,
    }


if __name__ == "__main__":
    ctx = seed(sys.argv[1])
    print(f"seeded run {ctx['run']}: workflow {ctx['workflow']}; role {ROLE} password {ctx['password']}")
    print("holding the fr child's claim; Ctrl-C to let it go")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
