// What the SQL functions that act on a whole workflow share
// (workflow.cpp, results.cpp).
#pragma once

#include "pg/base/spi.hpp"

namespace wf::pg {

// The queues a workflow's steps are in (latest snapshot): acting on the
// workflow needs a right on each. None for an unknown workflow.
std::vector<std::string> workflow_step_queues(Datum workflow_id);

// wf_cancel_workflow on a distributed pg_wf: each shard group with steps
// of the workflow cancels them (wf._cancel_workflow; wf._cancel_child,
// with bounded lock waits, `by_worker`), and its row is marked on every
// node, in the caller's transaction. Returns the steps cancelled.
int32 cancel_on_cluster(Datum workflow_id, bool by_worker = false);

// 42704 for a workflow id that names no workflow.
[[noreturn]] void no_such_workflow(Datum workflow_id);

}  // namespace wf::pg
