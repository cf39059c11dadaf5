// The table of rate windows in shared memory (rate_windows.hpp); each window
// is a core::RateWindow, used under one spinlock.
#include "pg/runtime/rate_windows.hpp"

#include "core/rate_window.hpp"

extern "C" {
#include "common/hashfn.h"
#include "storage/spin.h"
}

namespace wf::pg {

int rate_limit_slots = 1024;

namespace {

constexpr int kMaxProbes = 32;  // slots a lookup looks at

struct Slot {
    RateWindowId id;
    bool used;
    core::RateWindow window;
};

struct Windows {
    slock_t lock;
    int count;
    // Slot slots[count] follow.
};

Windows* windows = nullptr;

Slot* slots() {
    return reinterpret_cast<Slot*>(reinterpret_cast<char*>(windows) + MAXALIGN(sizeof(Windows)));
}

// Under the lock: the window of `id` (nullptr if absent). With `create`, an
// absent one is made in a free slot (one never used, or whose window no
// longer counts any claim), and one of another limit starts afresh;
// nullptr then means no free slot.
core::RateWindow* find(RateWindowId id, RateLimit limit, TimestampTz now, bool create) {
    int count = windows->count;
    if (count == 0) return nullptr;
    uint64 home = (id.queue_hash ^ (id.key_hash * UINT64CONST(0x9E3779B97F4A7C15))) % count;
    Slot* reusable = nullptr;
    for (int probe = 0; probe < std::min(kMaxProbes, count); probe++) {
        Slot* s = &slots()[(home + probe) % count];
        if (s->used && s->id.queue_hash == id.queue_hash && s->id.key_hash == id.key_hash) {
            if (create && !s->window.same_limit(limit.limit, limit.period_us))
                s->window.reset(limit.limit, limit.period_us, now);
            return &s->window;
        }
        if (!reusable && (!s->used || s->window.idle(now))) reusable = s;
        if (!s->used) break;  // slots are never emptied: the id is not further on
    }
    if (!create || !reusable) return nullptr;
    reusable->id = id;
    reusable->used = true;
    reusable->window.reset(limit.limit, limit.period_us, now);
    return &reusable->window;
}

}  // namespace

RateWindowId rate_window_id(std::string_view queue, const std::string_view* key) {
    RateWindowId id;
    // Windows are shared by the cluster: a queue's is its database's.
    id.queue_hash = hash_bytes_extended(reinterpret_cast<const unsigned char*>(queue.data()),
                                        static_cast<int>(queue.size()), 0x5746) ^
                    (uint64{MyDatabaseId} * UINT64CONST(0x9E3779B97F4A7C15));
    id.key_hash = key ? (hash_bytes_extended(reinterpret_cast<const unsigned char*>(key->data()),
                                             static_cast<int>(key->size()), 0x4b4559) | 1)
                      : 0;
    return id;
}

int rate_reserve(RateWindowId id, RateLimit limit, int want, TimestampTz at,
                 long* retry_after_ms) {
    *retry_after_ms = 0;
    if (!windows) return 0;
    int granted = 0;
    int64 retry_us = 0;
    SpinLockAcquire(&windows->lock);
    if (core::RateWindow* w = find(id, limit, at, true))
        granted = w->reserve(want, at, &retry_us);
    else
        retry_us = 100 * 1000;  // no free slot: try again soon
    SpinLockRelease(&windows->lock);
    if (retry_us > 0) *retry_after_ms = static_cast<long>((retry_us + 999) / 1000);
    return granted;
}

void rate_release(RateWindowId id, RateLimit limit, int n, TimestampTz at) {
    if (!windows || n <= 0) return;
    SpinLockAcquire(&windows->lock);
    if (core::RateWindow* w = find(id, limit, at, false)) w->release(n, at);
    SpinLockRelease(&windows->lock);
}

int rate_left(RateWindowId id, RateLimit limit, TimestampTz now) {
    if (!windows) return -1;
    int left = limit.limit;
    SpinLockAcquire(&windows->lock);
    core::RateWindow* w = find(id, limit, now, false);
    // A window of another limit is started afresh by the next claim.
    if (w && w->same_limit(limit.limit, limit.period_us)) left = w->left(now);
    SpinLockRelease(&windows->lock);
    return left;
}

Size rate_windows_size() {
    return add_size(MAXALIGN(sizeof(Windows)), mul_size(sizeof(Slot), rate_limit_slots));
}

void rate_windows_init(void* at, bool found) {
    windows = static_cast<Windows*>(at);
    if (found) return;
    memset(windows, 0, rate_windows_size());
    SpinLockInit(&windows->lock);
    windows->count = rate_limit_slots;
}

}  // namespace wf::pg
