"""/metrics in the Prometheus text exposition format (version 0.0.4).

Counters come from the view wf.metrics (pg_wf's shared memory: since the
server started, like pg_stat_*), gauges from wf.queue_stats. Both views show
only the queues the dashboard's role holds a right on.
"""

from __future__ import annotations

import math
from typing import Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# wf.metrics column -> (metric name, help)
COUNTERS = {
    "enqueued": ("pg_wf_jobs_enqueued_total", "Jobs enqueued since the server started."),
    "claimed": ("pg_wf_jobs_claimed_total", "Jobs claimed (attempts started) since the server started."),
    "completed": ("pg_wf_jobs_completed_total", "Jobs completed since the server started."),
    "failed": ("pg_wf_jobs_failed_total", "Jobs failed for good (dead letter) since the server started."),
    "retried": ("pg_wf_jobs_retried_total",
                "Attempts that failed and were scheduled again since the server started."),
    "recovered": ("pg_wf_jobs_recovered_total",
                  "Claims of lost workers taken back by the reaper since the server started."),
    "cancelled": ("pg_wf_jobs_cancelled_total", "Jobs cancelled since the server started."),
    "claim_waits": ("pg_wf_claim_waits_total", "Claims that waited for a job (wf_claim's wait)."),
    "claim_wait_seconds": ("pg_wf_claim_wait_seconds_total", "Total time waiting claims waited, in seconds."),
}
STATUSES = ("blocked", "pending", "running", "waiting", "done", "failed", "cancelled")


def escape_label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def fmt(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    v = float(value)  # Decimal, float
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict, object]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            if value is None:
                continue
            lbl = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{lbl}}} {fmt(value)}" if lbl else f"{name} {fmt(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(stats: list[dict] | None, metrics: list[dict] | None, error: str | None = None,
           has_metrics_view: bool = True) -> str:
    out = _Out()
    up = error is None
    out.family("pg_wf_up", "gauge", "1 if the dashboard could read pg_wf's views at this scrape, else 0.",
               [({}, 1 if up else 0)])
    if not up:
        out.lines.insert(0, "# error: " + " ".join(str(error).split()))
        return out.text()
    metrics = metrics or []
    stats = stats or []
    if has_metrics_view:
        for column, (name, help_text) in COUNTERS.items():
            out.family(name, "counter", help_text,
                       [({"queue": r["queue"]}, r.get(column)) for r in metrics if column in r])
    out.family("pg_wf_jobs", "gauge", "Jobs per queue and status now (wf.queue_stats).",
               [({"queue": r["queue"], "status": s}, r.get(s)) for r in stats for s in STATUSES if s in r])
    out.family("pg_wf_oldest_ready_age_seconds", "gauge",
               "Age of the oldest job ready to run (due and pending) per queue; 0 when none is.",
               [({"queue": r["queue"]},
                 r["oldest_ready_age"].total_seconds() if r.get("oldest_ready_age") is not None else 0)
                for r in stats])
    out.family("pg_wf_rate_left", "gauge",
               "Jobs the queue's rate limit lets start now (queues with a rate_limit).",
               [({"queue": r["queue"]}, r.get("rate_left")) for r in stats])
    if any("paused" in r for r in stats):
        out.family("pg_wf_queue_paused", "gauge", "1 if the queue is paused.",
                   [({"queue": r["queue"]}, r.get("paused")) for r in stats])
    return out.text()
