// Session-bound ownership of running jobs (see ownership.cpp).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

// The key of this session's advisory lock, held from its first claim to its
// exit. Stored in wf.claim.owner_session.
int64 session_owner_key();
void ensure_session_holds_owner_lock();
// True if the session with that key still holds its lock. The reaper's test.
bool owner_is_alive(int64 owner_key);

}  // namespace wf::pg
