// Sliding windows of rate limits in shared memory (rate_windows.hpp).
#include "pg/runtime/rate_windows.hpp"

extern "C" {
#include "common/hashfn.h"
#include "storage/spin.h"
}

namespace wf::pg {

int rate_limit_slots = 1024;

namespace {

constexpr int64 kBuckets = 32;               // per period
constexpr int kRing = 2 * kBuckets + 1;      // buckets kept: a span of two periods
constexpr int kMaxProbes = 32;               // slots a lookup looks at

struct Window {
    RateWindowId id;
    bool used;
    int32 limit;
    int64 width_us;   // of a bucket: period / kBuckets
    int64 head;       // the latest bucket recorded
    int32 counts[kRing];
};

struct Windows {
    slock_t lock;
    int count;
    // Window slots[count] follow.
};

Windows* windows = nullptr;

Window* slots() { return reinterpret_cast<Window*>(reinterpret_cast<char*>(windows) + MAXALIGN(sizeof(Windows))); }

int64 bucket_width(RateLimit limit) { return std::max<int64>(1, limit.period_us / kBuckets); }

// A window none of whose counts is in the span of a reservation now.
bool idle(const Window& w, TimestampTz now) {
    return !w.used || w.head < now / w.width_us - kBuckets;
}

// Moves the ring's head to bucket `b`, emptying the buckets it passes.
void advance(Window* w, int64 b) {
    if (b <= w->head) return;
    if (b - w->head >= kRing) {
        memset(w->counts, 0, sizeof(w->counts));
    } else {
        for (int64 i = w->head + 1; i <= b; i++) w->counts[i % kRing] = 0;
    }
    w->head = b;
}

// Under the lock: the window of `id`, made if absent (nullptr: no room).
Window* find(RateWindowId id, RateLimit limit, TimestampTz now, bool create) {
    int count = windows->count;
    if (count == 0) return nullptr;
    uint64 home = (id.queue_hash ^ (id.key_hash * UINT64CONST(0x9E3779B97F4A7C15))) % count;
    Window* reusable = nullptr;
    for (int probe = 0; probe < std::min(kMaxProbes, count); probe++) {
        Window* w = &slots()[(home + probe) % count];
        if (w->used && w->id.queue_hash == id.queue_hash && w->id.key_hash == id.key_hash) {
            if (create && (w->width_us != bucket_width(limit) || w->limit != limit.limit)) {
                // The limit changed: a new window from now on.
                w->limit = limit.limit;
                w->width_us = bucket_width(limit);
                w->head = now / w->width_us;
                memset(w->counts, 0, sizeof(w->counts));
            }
            return w;
        }
        if (!reusable && idle(*w, now)) reusable = w;
        if (!w->used) break;  // slots are never emptied: the key is not further on
    }
    if (!create || !reusable) return nullptr;
    reusable->id = id;
    reusable->used = true;
    reusable->limit = limit.limit;
    reusable->width_us = bucket_width(limit);
    reusable->head = now / reusable->width_us;
    memset(reusable->counts, 0, sizeof(reusable->counts));
    return reusable;
}

// Claims counted against a reservation at bucket `b` (after advancing):
// buckets b - kBuckets .. head. -1: `b` is too old for the ring.
int64 counted(const Window& w, int64 b, int64* oldest_nonzero) {
    int64 lo = b - kBuckets;
    if (w.head - lo + 1 > kRing) return -1;
    int64 sum = 0;
    *oldest_nonzero = -1;
    for (int64 i = lo; i <= w.head; i++) {
        int32 c = w.counts[i % kRing];
        if (c > 0 && *oldest_nonzero < 0) *oldest_nonzero = i;
        sum += c;
    }
    return sum;
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
    SpinLockAcquire(&windows->lock);
    Window* w = find(id, limit, at, true);
    if (!w) {
        *retry_after_ms = 100;  // no free slot: try again soon
    } else {
        int64 b = at / w->width_us;
        advance(w, b);
        int64 oldest = -1;
        int64 sum = counted(*w, b, &oldest);
        if (sum < 0) {
            *retry_after_ms = 1;  // a claimer whose clock lags far behind: let it read it again
        } else {
            granted = static_cast<int>(std::clamp<int64>(w->limit - sum, 0, want));
            w->counts[b % kRing] += granted;
            if (granted < want) {
                // Room comes back when the oldest counted bucket leaves the span.
                int64 frees_at = oldest >= 0 ? (oldest + kBuckets + 1) * w->width_us
                                             : (b + 1) * w->width_us;
                *retry_after_ms = std::max<long>(1, static_cast<long>((frees_at - at + 999) / 1000));
            }
        }
    }
    SpinLockRelease(&windows->lock);
    return granted;
}

void rate_release(RateWindowId id, RateLimit limit, int n, TimestampTz at) {
    if (!windows || n <= 0) return;
    SpinLockAcquire(&windows->lock);
    if (Window* w = find(id, limit, at, false)) {
        int64 b = at / w->width_us;
        if (b <= w->head && b > w->head - kRing) {
            int32& c = w->counts[b % kRing];
            c -= std::min(c, n);
        }
    }
    SpinLockRelease(&windows->lock);
}

int rate_left(RateWindowId id, RateLimit limit, TimestampTz now) {
    if (!windows) return -1;
    int left = limit.limit;
    SpinLockAcquire(&windows->lock);
    Window* w = find(id, limit, now, false);
    // A window of another limit is started afresh by the next claim.
    if (w && w->width_us == bucket_width(limit)) {
        int64 b = now / w->width_us;
        advance(w, b);
        int64 oldest;
        int64 sum = counted(*w, b, &oldest);
        left = sum < 0 ? 0 : static_cast<int>(std::clamp<int64>(limit.limit - sum, 0, limit.limit));
        if (w->limit != limit.limit) left = limit.limit;
    }
    SpinLockRelease(&windows->lock);
    return left;
}

Size rate_windows_size() {
    return add_size(MAXALIGN(sizeof(Windows)), mul_size(sizeof(Window), rate_limit_slots));
}

void rate_windows_init(void* at, bool found) {
    windows = static_cast<Windows*>(at);
    if (found) return;
    memset(windows, 0, rate_windows_size());
    SpinLockInit(&windows->lock);
    windows->count = rate_limit_slots;
}

}  // namespace wf::pg
