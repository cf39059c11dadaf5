// The dependency engine: edges between jobs (wf_enqueue's depends_on and
// workflow steps), the release of blocked children when their parents
// finish, the debts the worker settles for children another transaction
// held, and the cancel and restore of descendants. Runs inside SPI.
#pragma once

#include "pg/base/spi.hpp"

namespace wf::pg {

// The state of a new job's dependencies, which are locked (in id order) until
// the enqueue commits, so that none finishes unseen.
struct DependencyState {
    std::vector<int64> unfinished;  // not done yet: the new job waits on these
    int64 failed = 0;               // a failed or cancelled one, if any
    bool failed_was_cancelled = false;  // ... and which of the two
    // Edges go to every dependency not done, failed ones included: a
    // wf_retry of a failed one must find and release this job later.
    std::vector<int64> not_done;
    std::vector<std::string> queues;  // of all of them, each once
    // On a distributed pg_wf, the ids not in this shard group: each is
    // looked up, and the job subscribed to it, by the node's worker
    // (remote_dependencies.hpp).
    std::vector<int64> remote;
};
// Locks and reads `ids` (sorted, unique); 23503 names one that does not
// exist (on a distributed pg_wf: that is not in this shard group, `remote`).
// Flags the unfinished ones as having dependents.
DependencyState lock_dependencies(const std::vector<int64>& ids);
// Records that job (child_queue, child_id) depends on `parents`.
void add_dependency_edges(const std::vector<int64>& parents, Datum child_queue, int64 child_id);

// Cancels, transitively, every blocked job that waits on one of `job_ids`,
// which just failed or were cancelled; their last_error reads "dependency
// job N <what_happened>", or 'step "name" (job N) <what_happened>' for a
// workflow step. Returns how many were cancelled.
uint64 cancel_dependents(const std::vector<int64>& job_ids, const char* what_happened);

// Releases the blocked children of jobs that just finished: their count of
// unfinished dependencies goes down by one per finished parent, and at zero
// they become pending. A child held by another transaction (a sibling
// parent's completion) is left to the background worker, when it runs,
// as a row in wf.release_debt.
void release_dependents(const std::vector<int64>& job_ids);

// Releases `children` (their edge from `parent` only), locked in order,
// waiting for them: a dependency in another shard group that ended.
void release_children_of(int64 parent, const std::vector<int64>& children);

// The worker's side: applies the releases left in wf.release_debt to the
// children no other transaction holds. Returns the children updated;
// *debts_left says whether debts remain on children another transaction
// still holds (the worker then tries again soon).
int64 settle_release_debts(bool* debts_left = nullptr);

// Before a retry of job (queue, id) counts its unfinished dependencies:
// locks them, so that one completing meanwhile either is seen done or waits
// and then releases it.
void lock_dependencies_of(Datum queue, int64 id);
// The jobs that the failure of `id` cancelled come back, blocked on it again.
void restore_descendants(int64 id);

}  // namespace wf::pg

// A CTE `forgiven`: a recount of a job's unfinished dependencies sees every
// committed completion, so the same statement (one snapshot) cancels the
// debts those completions left toward the jobs of CTE CHANGED.
#define WF_SQL_FORGIVE_DEBTS(CHANGED) \
    ", forgiven AS (DELETE FROM wf.release_debt r WHERE r.child_id IN (SELECT id FROM " CHANGED "))"
