// pg_wf's advisory locks: field4 of their lock tags (pg_locks.objsubid) is
// one of these spaces, where pg_advisory_lock uses 1 and 2, so no
// application lock can collide with them. Plain C (no throw); take them
// through call().
#pragma once

#include "pg/base/postgres.hpp"

extern "C" {
#include "common/hashfn.h"
}

namespace wf::pg {

enum class LockSpace : uint16 {
    session_owner = 0x5746,  // "WF": a claiming session's lock (ownership.cpp), 22342
    child_workflow = 0x5747,  // a child workflow being started (job_state.cpp), 22343
    flow_key = 0x574b,        // "WK": a key of a flow-controlled queue (flow_control.cpp), 22347
};

// The lock of 64-bit `key` in `space`, in this database.
inline LOCKTAG advisory_lock_tag(LockSpace space, uint64 key) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(key >> 32), static_cast<uint32>(key),
                         static_cast<uint16>(space));
    return tag;
}

// The lock of `bytes` in `space`, by a hash of them: a collision only makes
// one lock wait for another needlessly.
inline LOCKTAG hashed_lock_tag(LockSpace space, const void* bytes, int length) {
    return advisory_lock_tag(space, hash_bytes_extended(static_cast<const unsigned char*>(bytes), length,
                                                        static_cast<uint64>(space)));
}

}  // namespace wf::pg
