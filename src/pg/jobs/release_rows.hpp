// The release of blocked children without the executor: the completion's
// hot path when the jobs it finished have dependents (dependencies.cpp
// decides when it applies).
#pragma once

#include <string>
#include <vector>

#include "pg/base/postgres.hpp"

namespace wf::pg {

struct Released {
    std::vector<int64> locked;               // children this transaction now holds
    std::vector<std::string> ready_queues;   // queues of those that became pending
    bool skipped = false;                    // a blocked child another transaction held
};

// wf.release_wait: how long a completion call waits in all for other
// transactions holding children that only its parents and at most one
// more still block.
extern int release_wait_ms;

// For each blocked child of `parents` (jobs that just finished, found
// through wf.dependency's key), locked in id order: its unfinished
// dependencies go down by one per finished parent, and at zero it becomes
// pending (run_at no earlier than now) and enters the ready set. A child
// another transaction holds is waited for, without queueing on its lock,
// when these parents and one more are all it still depends on (at most
// wf.release_wait for all children of the call together); else it is
// skipped, and the caller leaves its release to the worker. The
// executor's checks are made as for the SQL it replaces (direct_table.hpp).
Released release_children_by_hand(const std::vector<int64>& parents);

}  // namespace wf::pg
