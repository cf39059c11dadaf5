// The node's worker takes what calls left in wf.outbox to other shard
// groups (jobs/remote_dependencies.hpp), on a distributed pg_wf.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Relays the oldest entry of wf.outbox that no other transaction holds, in
// the caller's transaction (inside SPI, as pg_wf's owner): its calls into
// other shard groups go through Citus, and the entry is deleted with them.
// Returns false when there was none.
bool relay_one_entry();

}  // namespace wf::pg
