// The start of attempts without the executor: for each ready row a claim
// took (ready_set.hpp), the job row is read by key and checked, and a
// claim row inserted, where SQL paid an executor start-up and a plan for a
// statement of three CTEs per claim.
#pragma once

#include <vector>

#include "pg/base/postgres.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/jobs/ready_set.hpp"

namespace wf::pg {

// Begins, in `queue`, for this session (`owner`, at `now`), the next
// attempt of each job of `ready` whose row still matches it: pending, the
// ready row's priority and run_at, not past its start-by time on a first
// attempt. A job that does not match is not handed out (its ready row is
// used up; the worker fails a job past its start-by time). Returns the
// claimed jobs in the order of `ready`, their values copied into the
// current memory context; their inputs and checkpoints are left NULL for
// the caller (reads_inputs, reads_checkpoints).
std::vector<ClaimedJob> start_attempts(Datum queue, const ClaimOwner& owner, TimestampTz now,
                                       const std::vector<ReadyRow>& ready);

}  // namespace wf::pg
