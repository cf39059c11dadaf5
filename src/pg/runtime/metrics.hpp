// Counters per queue, since the server started, in pg_wf's shared memory
// (like pg_stat_*): jobs enqueued, claimed, completed, failed, retried,
// recovered and cancelled, and the time waiting claims waited. Read by the
// view wf.metrics (wf._metrics()), scraped by the dashboard's /metrics.
//
// A transaction counts into backend-local totals and adds them to shared
// memory when it commits: an aborted transaction counts nothing. Shared
// memory holds one slot per (database, queue), found by hash under a
// spinlock; the counters are atomics. Plain code: nothing here throws or
// ereports (count() may throw bad_alloc, inside a SQL function's guard).
#pragma once

#include <string_view>

#include "pg/base/postgres.hpp"

namespace wf::pg {

enum class Metric : int {
    enqueued,
    claimed,
    completed,
    failed,
    retried,    // attempts that failed and were scheduled again
    recovered,  // claims of lost workers taken back (reaper)
    cancelled,
    claim_waits,        // claims that waited (wf_claim's wait)
    claim_wait_micros,  // the time they waited
    count_
};
constexpr int kMetrics = static_cast<int>(Metric::count_);

// GUC wf.metrics_slots: queues (of all databases) counted at once; the
// counts of queues beyond it are not kept.
extern int metrics_slots;

// Adds `n` to the queue's counter when the transaction commits.
void count(std::string_view queue, Metric metric, int64 n = 1);
// From _PG_init: the commit callback that publishes the counts.
void register_metrics_callback();

// The counters of this database's queues.
struct QueueMetrics {
    std::string queue;
    uint64 values[kMetrics];
};
std::vector<QueueMetrics> read_metrics();

// Its part of pg_wf's shared memory segment (see shared_memory.hpp).
Size metrics_size();
void metrics_init(void* at, bool found);

}  // namespace wf::pg
