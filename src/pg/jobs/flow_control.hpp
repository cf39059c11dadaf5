// Flow control inside the claim: which ready rows a claim may take when its
// queue limits how fast and how much runs (wf_configure_queue).
//
//  * rate_limit per rate_period, for the queue and per key (key_rate_limit):
//    sliding windows in shared memory (runtime/rate_windows.hpp), exact
//    across every claimer;
//  * key_concurrency: at most K running jobs per key;
//  * fair: claims go from key to key in rotation (ready_set.hpp's
//    ReadySetByKey), one job per key per turn, so that a key with a million
//    ready jobs does not delay another key's ten;
//  * ordered: the jobs of a key run one at a time, in enqueue order; the
//    group's head is its first job, from the last one claimed
//    (wf.ordered_group) on, that did not end done or cancelled. A failed
//    head blocks its group until wf_retry runs it again or wf_cancel skips it.
//
// Per-key limits and ordering also claim key by key (a key at its limit is
// skipped with one index descent, not row by row). A claim counts a key's
// running jobs, or finds its head, holding a transaction lock on the key
// (taken without waiting: a key another claim holds is skipped), and reads
// them with the latest snapshot, so two claims never both see room for one.
// A queue with none of these settings never comes here.
#pragma once

#include <optional>

#include "pg/jobs/ready_set.hpp"
#include "pg/runtime/rate_windows.hpp"

namespace wf::pg {

struct FlowControl {
    std::optional<RateLimit> rate;      // the queue's
    std::optional<RateLimit> key_rate;  // each key's
    int32 key_concurrency = 0;          // 0: none
    bool fair = false;
    bool ordered = false;

    bool by_key() const { return fair || ordered || key_concurrency > 0 || key_rate; }
    bool any() const { return rate || by_key(); }
};

// The rows a claim took, and when it took them (the jobs' start).
struct FlowPick {
    std::vector<ReadyRow> rows;
    TimestampTz at = 0;
    // Some limit held the claim back: milliseconds until it may have room
    // again (a rate window refills, a key another claim holds is free);
    // -1 when none did, or only running jobs did (their ends wake claimers).
    long retry_after_ms = -1;
};

// An enqueue into an ordered queue takes the locks of its jobs' keys
// (waiting for them), in key order, until it commits: while a claim holds a
// key, no job of that key is being enqueued, so a job committed later has
// a later id -- enqueue order is id order within a key, and a group's head
// never has a job before it that commits late.
void lock_keys_for_enqueue(std::string_view queue, std::vector<std::string> keys);

// Takes up to `limit` due ready rows of `queue` as `flow` allows.
FlowPick take_with_flow_control(Datum queue, std::string_view queue_name, int limit,
                                const FlowControl& flow);

}  // namespace wf::pg
