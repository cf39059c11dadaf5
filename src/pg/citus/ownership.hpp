// Who owns a running job on a distributed pg_wf. A call reaches the node
// holding its queue's shard through a connection Citus keeps from the
// client's own backend (on the coordinator, or any node); that connection
// can close while the client lives (an error raised there, a timeout, its
// lifetime), and a new one serves the client's next call. So a claim is
// owned by the client's session, named by its Citus global pid, not by the
// backend that served the claim: its owner key is -gpid. The serving
// backend holds the key's lock while it lives; when nobody holds it, the
// reaper asks the cluster whether that global pid is still running
// (citus_stat_activity) before it takes the job back.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// The owner key of the client this backend serves: -(its Citus global
// pid). Inside SPI.
int64 citus_origin_owner_key();

// `dead` without the origin keys whose client is still running. Inside
// SPI, in the background worker (it asks the other nodes as itself, not
// as pg_wf's owner, which cannot log in).
std::vector<int64> without_live_origins(const std::vector<int64>& dead);

}  // namespace wf::pg
