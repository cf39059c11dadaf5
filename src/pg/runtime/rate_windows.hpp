// Rate limits' sliding windows, in shared memory: how many claims a queue
// (or one key of it) made in the last period, one core::RateWindow each
// (src/core/rate_window.hpp says why no window of one period ever admits
// more than the limit). Exact across every claimer of the cluster: a claim
// reserves its budget here, under one spinlock, at the time it records as
// its jobs' start, and gives back what it did not take.
//
// Plain code: nothing here throws or ereports. The windows live as long as
// the server: a restart starts them empty.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// GUC wf.rate_limit_slots: how many windows (a queue's, or a key's) shared
// memory holds at once. A window whose period passed without a claim is
// reused; when none is free, a claim that needs one takes nothing.
extern int rate_limit_slots;

struct RateLimit {
    int32 limit;       // claims per period
    int64 period_us;   // > 0
};

// A window's identity: its queue and, for a key's own window, its key.
struct RateWindowId {
    uint64 queue_hash;
    uint64 key_hash;  // 0: the queue's window
};
RateWindowId rate_window_id(std::string_view queue, const std::string_view* key);

// Reserves up to `want` claims at time `at` (microseconds, as TimestampTz);
// returns how many the window allows. When fewer than `want`,
// *retry_after_ms says when the window next has room (an estimate that is
// never early by more than a millisecond).
int rate_reserve(RateWindowId id, RateLimit limit, int want, TimestampTz at,
                 long* retry_after_ms);
// Gives back `n` claims reserved at `at` and not made.
void rate_release(RateWindowId id, RateLimit limit, int n, TimestampTz at);
// What the window allows now, without reserving it.
int rate_left(RateWindowId id, RateLimit limit, TimestampTz now);

// Its part of pg_wf's shared memory segment (see shared_memory.hpp).
Size rate_windows_size();
void rate_windows_init(void* at, bool found);

}  // namespace wf::pg
