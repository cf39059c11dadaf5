// Taking jobs out of the ready set (wf.ready) without the executor.
#pragma once

#include <memory>
#include <optional>

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

// The same, only of jobs whose version is one of `versions` (text datums),
// from index wf.ready_version_order: each version's rows are one index
// range, so jobs of versions this claimer does not run cost it nothing.
std::vector<ReadyRow> take_ready_rows_of_versions(Datum queue, TimestampTz now, int limit,
                                                  const std::vector<Datum>& versions);

// The ready rows of one key, or (is_null) of the jobs without a key. Keys
// order as bytes, as wf.ready's key column (COLLATE "C") does in the index.
struct ReadyGroup {
    bool is_null = false;
    std::string key;
    bool operator<(const ReadyGroup& o) const {
        return is_null != o.is_null ? o.is_null : key < o.key;
    }
    bool operator==(const ReadyGroup& o) const { return is_null == o.is_null && key == o.key; }
};

// The ready set of one queue key by key (index wf.ready_key_order), for a
// claim that goes from key to key: each step to the next key is one index
// descent, however many rows the key before it has. Takes rows as
// take_ready_rows does, at one snapshot and command id for the whole claim.
// close() at the end of a claim that did not fail (an error's abort
// releases it instead).
class ReadySetByKey {
public:
    explicit ReadySetByKey(Datum queue);
    ~ReadySetByKey();
    ReadySetByKey(const ReadySetByKey&) = delete;
    ReadySetByKey& operator=(const ReadySetByKey&) = delete;
    void close();

    // The first group after `after` (none: the first) that has rows, in
    // key order with the group without a key last; none past the last.
    std::optional<ReadyGroup> next_group(const std::optional<ReadyGroup>& after);
    // Takes up to `limit` due rows of the group, in claim order, or only
    // the row `exact` (a job's own, when given); appends them to `out`.
    int take(const ReadyGroup& group, TimestampTz now, int limit, const ReadyRow* exact,
             std::vector<ReadyRow>* out);

private:
    struct Open;
    Datum queue_;
    std::unique_ptr<Open> open_;
    bool closed_ = false;
};

}  // namespace wf::pg
