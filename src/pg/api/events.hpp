// Events on a distributed pg_wf, shared by wf_signal (steps.cpp) and
// wf_signal_with_start (workflow.cpp).
#pragma once

#include <optional>
#include <string_view>

#include "pg/base/postgres.hpp"

namespace wf::pg {

// wf_signal on a distributed pg_wf: in the caller's transaction, every
// node's copy of the event row (a reference table, which a call on one
// node does not write), then each shard group with waits for it. A wait
// that could not see the signal yet is woken by its node's worker. Returns
// the jobs woken.
int64 signal_on_cluster(std::string_view event, std::optional<Datum> payload);

}  // namespace wf::pg
