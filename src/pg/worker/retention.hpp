// Retention: finished jobs older than wf.retention are deleted, in small
// batches, with what they leave behind elsewhere.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// One retention step, inside SPI: deletes up to `batch` finished jobs whose
// finish is older than `keep_seconds`, walking job ids upwards from
// `*cursor` (ids grow with time). The cursor goes back to 0 when it reaches
// jobs too young to expire. Returns the number of jobs deleted.
int64 expire_finished_jobs(int64* cursor, int keep_seconds, int batch);

// On a distributed pg_wf, on the coordinator: up to `batch` events
// signalled (or made) longer than `keep_seconds` ago that no job waits for,
// deleted from every node's copy of wf.event through Citus, as retention
// does on one server (a later await of such an event waits for a new
// signal). Returns the number deleted.
int64 expire_cluster_events(int keep_seconds, int batch);

}  // namespace wf::pg
