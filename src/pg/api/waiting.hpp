// Waiting inside a SQL function call (a claim with `wait`, wf_wait_job,
// wf_wait_workflow) without holding back vacuum or outliving the client.
// Plain C: both run inside call().
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Without pg_wf's shared memory (not preloaded) commits cannot set a
// waiter's latch: a wait polls this often instead.
constexpr long kPollWithoutSharedMemoryMs = 100;

// Sleeps until the latch is set or `timeout_ms` passes; a client that is
// gone ends the session (FATAL 08006 at the next CHECK_FOR_INTERRUPTS).
void wait_for_latch_or_lost_client(long timeout_ms);

// Whether the waiting statement reads nothing after the function returns,
// so that its snapshot's xmin may be let go for the wait.
bool statement_reads_nothing_else();

}  // namespace wf::pg
