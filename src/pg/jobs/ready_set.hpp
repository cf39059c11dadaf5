// Taking jobs out of the ready set (wf.ready) without the executor.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// A ready row: the key of one pending job in claim order.
struct ReadyRow {
    int64 id;
    int32 priority;
    TimestampTz run_at;
};

// Deletes up to `limit` ready rows of `queue` that are due at `now`, in
// claim order (priority DESC, run_at, id), and returns them. A row another
// transaction is deleting (a concurrent claim, a cancel) is skipped, never
// waited for: the same rows FOR UPDATE SKIP LOCKED would take, but each
// costs one heap delete and no row lock, so the claim writes one WAL record
// per job instead of two. Runs at a new command id with a fresh snapshot
// (as an SPI statement would), so it sees the transaction's own earlier
// writes and, in READ COMMITTED, every job committed before it.
std::vector<ReadyRow> take_ready_rows(Datum queue, TimestampTz now, int limit);

}  // namespace wf::pg
