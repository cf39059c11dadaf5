// pg_wf's caches hear of relcache invalidations through one callback of
// its own: PostgreSQL has room for ten per backend, for every library
// loaded in it (Citus alone takes five), and running out is FATAL.
#pragma once

#include "pg/base/postgres.hpp"

extern "C" {
#include "utils/inval.h"
}

namespace wf::pg {

// Plain C (call it inside call()): `listener` hears every relcache
// invalidation from now on (InvalidOid: all of them). Adding one twice
// adds it once.
void listen_to_relcache(RelcacheCallbackFunction listener);

}  // namespace wf::pg
