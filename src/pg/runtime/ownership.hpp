// Session-bound ownership of running jobs (see ownership.cpp).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// The key of this session's advisory lock, held from its first claim to its
// exit. Stored in wf.claim.owner_session.
int64 session_owner_key();
// `origin_key` (nonzero on a distributed pg_wf, citus/ownership.hpp): the
// key of the client session this backend serves for Citus. Several
// backends may serve one client: the lock is taken if free, not waited for.
void ensure_session_holds_owner_lock(int64 origin_key = 0);
// True if the session with that key still holds its lock. The reaper's test.
bool owner_is_alive(int64 owner_key);

}  // namespace wf::pg
