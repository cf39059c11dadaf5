// The completion of running attempts without the executor: each job row is
// found by its key, locked, checked, and updated in place (a HOT update in
// the common case), and its claim deleted, where SQL paid an executor
// start-up and a plan for a statement of two CTEs per call.
#pragma once

#include <vector>

#include "pg/base/postgres.hpp"

namespace wf::pg {

struct AttemptToComplete {
    int64 id;
    int32 attempt;
    Datum result;  // jsonb
    bool result_null;
};

struct CompletedJob {
    int64 id;
    bool done;  // else cancelled: its cancellation was requested while it ran
    bool has_dependents;
    bool in_workflow;
    pg_uuid_t workflow_id;
    bool has_child_of;
};

// Completes, in `queue`, the attempts of `items` (sorted by id; an id given
// twice is completed once) that still run: their claim has that attempt and their job row says
// so once locked. Fills `out` (room for every item) in id order and returns
// how many it completed. As the executor's UPDATE would: a row another
// transaction is changing is waited for; in READ COMMITTED its latest
// version is checked again, in REPEATABLE READ or SERIALIZABLE its change
// is a serialization failure (40001). `function` names the SQL function
// in errors.
size_t complete_running_attempts(const char* function, Datum queue,
                                 const std::vector<AttemptToComplete>& items,
                                 std::vector<CompletedJob>* out);

}  // namespace wf::pg
