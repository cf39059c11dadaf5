// What follows when jobs end: the waiters of their results are woken, the
// child workflows they belonged to are settled (their outcome reaches the
// parent job), and the children of a cancelled job are cancelled with it.
// Every transition of job_state.cpp that ends jobs (done, failed,
// cancelled) hands its rows to jobs_ended(). Runs inside SPI.
//
// A child workflow (wf_start_child) is a row of wf.child naming its parent
// job. Its steps carry the parent's id (wf.job.child_of), so that the end
// of any of them settles it: under the child row's lock, the step that
// ends last sees every other step ended (latest snapshot) and records the
// outcome. The outcome is then delivered into the parent job's events as
// "wf:child:<name>"; a parent waiting in wf_await_children goes back to
// pending once every child of it is delivered. A parent row another
// transaction holds is skipped (never waited for: a cancel of the parent
// holds it while it cancels the children) and the background worker
// delivers a moment later (settle_undelivered_children).
#pragma once

#include <optional>

#include "pg/base/spi.hpp"

namespace wf::pg {

// The event name under which a parked job waits for its children, and the
// prefix of the names of its children's outcomes in its events. Names
// starting with "wf:" are pg_wf's: wf_signal and wf_await_event refuse them.
inline constexpr const char* kChildrenEvent = "wf:children";
inline constexpr const char* kChildOutcomePrefix = "wf:child:";
inline constexpr const char* kReservedEventPrefix = "wf:";

// One job that ended, as jobs_ended needs it.
struct EndedJob {
    enum Outcome { done, failed, cancelled };
    std::string_view queue;  // outlives the call
    int64 id;
    Outcome outcome;
    bool in_workflow;
    pg_uuid_t workflow_id;
    bool has_child_of;  // a step of a child workflow
};

// After jobs ended. Counts them (metrics.hpp).
void jobs_ended(const std::vector<EndedJob>& jobs);
// The same after a statement that ended jobs: `rows` has columns queue,
// id, status, workflow_id and child_of (rows whose status is not done,
// failed or cancelled are ignored).
void jobs_ended(const Rows& rows);

// A workflow's outcome: whether every step has ended, its status (done,
// failed, cancelled), the results of its final steps (those no job runs
// after) by step name, and the first failed step's error. Read with the
// latest snapshot.
struct WorkflowOutcome {
    bool exists = false;
    bool finished = false;
    std::string status;   // done, failed, cancelled; "running" while unfinished
    std::optional<std::string> results_json;
    std::optional<std::string> error;
};
WorkflowOutcome read_workflow_outcome(Datum workflow_id);

// The children of a parent job whose outcome it has not received yet,
// after delivering those recorded meanwhile (the caller holds the parent's
// row).
int64 undelivered_children(Datum queue, int64 parent_id);

// On a distributed pg_wf, in the parent's shard group (wf._deliver_child,
// called by the node's worker, which marks the child delivered in the same
// transaction): child workflow `workflow_id`'s outcome joins the parent's
// events under `name`, and a parent parked in wf_await_children with no
// other child undelivered goes back to pending. 0 when the parent is gone.
int64 deliver_child_outcome(Datum parent_queue, int64 parent_id, Datum workflow_id, Datum name,
                            Datum outcome);

// The background worker's pass (and wf_sweep's): outcomes recorded but not
// delivered, because their parent was held. Returns how many it delivered.
int64 settle_undelivered_children();

}  // namespace wf::pg
