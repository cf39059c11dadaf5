// pg_wf's shared memory, present only when the library is in
// shared_preload_libraries: one segment, laid out by the two modules that
// use it (the worker registry and the wake-ups' waiter slots).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

void request_shared_memory();  // from _PG_init, when preloading
bool shared_memory_ready();     // false without shared_preload_libraries

}  // namespace wf::pg
