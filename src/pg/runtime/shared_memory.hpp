// pg_wf's shared memory, present only when the library is in
// shared_preload_libraries: one segment, "pg_wf", in which each module that
// uses it owns its part. A part's owner gives its size (`..._size()`) and
// is handed its place by the startup hook (`..._init(at, found)`; `found`:
// already set up, when the postmaster did it for a backend that attaches
// again). The parts: the worker registry, the wake-ups' waiter slots and
// the rate limits' windows, the metrics' counters.
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

void request_shared_memory();  // from _PG_init, when preloading
bool shared_memory_ready();     // false without shared_preload_libraries

}  // namespace wf::pg
