// Per-queue settings as claims and enqueues need them, cached per backend.
// They are the hottest paths: reading wf.queue_config there on every call
// cost a statement (or a subquery) per job. wf_configure_queue sends a relcache invalidation for
// wf.queue_config at commit, which empties every backend's cache before its
// next transaction reads it. (Settings changed by a direct UPDATE of the
// table are seen after the next invalidation: use wf_configure_queue.)
#pragma once

#include "pg/jobs/job_state.hpp"

namespace wf::pg {

struct QueueSettings {
    bool paused = false;
    bool has_max_running = false;  // the claim then locks and re-reads the row
    bool has_lease = false;
    Interval lease{};
    int32 max_attempts = WF_DEFAULT_MAX_ATTEMPTS;  // of a job enqueued without its own
    FlowControl flow;                              // none set: flow.any() is false
    std::optional<Interval> max_run_time;          // of a job enqueued without its own
    std::optional<std::string> version;            // of a job enqueued without its own
};

// GUC wf.default_lease, in ms (0: none): the lease of a claim that names
// none, in a queue that has none. Set per role or database for clients
// behind a transaction-mode pooler, whose server session outlives them.
extern int default_lease_ms;

// Reads through the cache; runs inside SPI.
QueueSettings queue_settings(Datum queue);

// A rate limit of `limit` per `period`, as claims and wf._rate_left count
// it (a window is found by its limit and period too).
RateLimit rate_limit_of(int32 limit, const Interval* period);

// 55000 unless pg_wf's shared memory, where rate windows live, is there.
void require_rate_windows();

// Called by wf_configure_queue after it changed a queue's row.
void invalidate_queue_settings();

}  // namespace wf::pg
