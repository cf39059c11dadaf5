// Per-queue settings as a claim needs them, cached per backend. A claim is
// the hottest path: reading wf.queue_config there on every call cost a
// statement per job. wf_configure_queue sends a relcache invalidation for
// wf.queue_config at commit, which empties every backend's cache before its
// next transaction reads it. (Settings changed by a direct UPDATE of the
// table are seen after the next invalidation: use wf_configure_queue.)
#pragma once

#include "postgres.hpp"

namespace wf::pg {

struct QueueSettings {
    bool paused = false;
    bool has_max_running = false;  // the claim then locks and re-reads the row
    bool has_lease = false;
    Interval lease{};
};

// Reads through the cache; must run inside an open SpiConnection.
QueueSettings queue_settings(Datum queue);

// Called by wf_configure_queue after it changed a queue's row.
void invalidate_queue_settings();

}  // namespace wf::pg
