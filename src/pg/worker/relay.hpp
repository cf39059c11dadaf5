// The node's worker takes what calls left in wf.outbox to other shard
// groups (jobs/remote_dependencies.hpp), on a distributed pg_wf.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Relays the oldest entry of wf.outbox that no other transaction holds and
// that is not deferred, in the caller's transaction (inside SPI, as pg_wf's
// owner): its calls into other shard groups go through Citus, and the entry
// is deleted with them. Returns false when there was none; `*taken` is the
// entry's id as soon as it is taken.
bool relay_one_entry(int64* taken);

// After the transaction of relay_one_entry failed with SQLSTATE `code` (a
// node down, a lock wait bounded by BoundedLockWaits, an entry that cannot
// be relayed): entry `id` is tried again after a delay (a second, doubling
// to a minute while it keeps failing), and the entries after it go first --
// each entry stands alone, so one that fails holds back no other. A call
// that ran on the wrong node (Citus did not send it to the node of its
// queue's shard: 0A000, or 40001 when the shard moved) costs no remote
// connection and is usually over soon: it is tried again after a quarter
// of a second, doubling to a second at most, for its first 30 failures.
// In this worker's memory: a restarted worker tries every entry at once.
// Returns true when an entry fails so after failing otherwise or not at
// all (the worker then logs log_citus_nodes()).
bool defer_failed_entry(int64 id, int code);

// Logs what Citus's metadata on this node says of every node (whether it
// has and is in sync with the metadata, which Citus needs to send a call
// to it): the cause of a call run on the wrong node, inside SPI.
void log_citus_nodes();

}  // namespace wf::pg
