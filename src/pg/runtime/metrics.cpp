// See metrics.hpp.
#include "pg/runtime/metrics.hpp"

extern "C" {
#include "common/hashfn.h"
#include "storage/spin.h"
}

namespace wf::pg {

int metrics_slots = 1024;

namespace {

constexpr size_t kQueueBytes = 128;  // core::limits::queue_name_bytes

struct Slot {
    Oid database;  // InvalidOid: free
    uint32 hash;
    uint16 length;
    char queue[kQueueBytes];
    pg_atomic_uint64 values[kMetrics];
};

struct Table {
    slock_t lock;  // taken to find or claim a slot
    int count;
    // followed by Slot[count]
};

Table* table = nullptr;  // null without shared_preload_libraries

Slot* slots() {
    return reinterpret_cast<Slot*>(reinterpret_cast<char*>(table) + MAXALIGN(sizeof(Table)));
}

// This transaction's counts, by queue (a transaction touches few queues),
// each with its shared slot once known.
struct Pending {
    std::string queue;
    int64 values[kMetrics];
};
std::vector<Pending> pending;

// The slots this backend found, by queue: a slot never moves or changes
// queue until the server restarts, so a commit looks its queues up here,
// without the spinlock (16 committing clients on it cost an enqueue 20%).
constexpr size_t kCachedSlots = 64;
struct CachedSlot {
    uint32 hash;
    uint16 length;
    char queue[128];
    void* slot;
};
CachedSlot cached[kCachedSlots];
size_t cached_count = 0;

uint32 hash_of(std::string_view queue) {
    return hash_bytes(reinterpret_cast<const unsigned char*>(queue.data()),
                      static_cast<int>(queue.size()));
}

// The slot of (this database, queue), claimed if new; null when full.
Slot* slot_of(std::string_view queue) {
    uint32 hash = hash_of(queue);
    Slot* all = slots();
    Slot* found = nullptr;
    SpinLockAcquire(&table->lock);
    for (int probe = 0; probe < table->count; probe++) {
        Slot* s = &all[(hash + static_cast<uint32>(probe)) % static_cast<uint32>(table->count)];
        if (s->database == InvalidOid) {
            s->database = MyDatabaseId;
            s->hash = hash;
            s->length = static_cast<uint16>(queue.size());
            memcpy(s->queue, queue.data(), queue.size());
            found = s;
            break;
        }
        if (s->database == MyDatabaseId && s->hash == hash && s->length == queue.size() &&
            memcmp(s->queue, queue.data(), queue.size()) == 0) {
            found = s;
            break;
        }
    }
    SpinLockRelease(&table->lock);
    return found;
}

// slot_of() through this backend's cache.
Slot* cached_slot_of(std::string_view queue) {
    uint32 hash = hash_of(queue);
    for (size_t i = 0; i < cached_count; i++)
        if (cached[i].hash == hash && cached[i].length == queue.size() &&
            memcmp(cached[i].queue, queue.data(), queue.size()) == 0)
            return static_cast<Slot*>(cached[i].slot);
    Slot* s = slot_of(queue);
    if (s != nullptr && cached_count < kCachedSlots) {
        CachedSlot& c = cached[cached_count++];
        c.hash = hash;
        c.length = static_cast<uint16>(queue.size());
        memcpy(c.queue, queue.data(), queue.size());
        c.slot = s;
    }
    return s;
}

void on_transaction_end(XactEvent event, void*) {
    if (pending.empty()) return;
    if (event == XACT_EVENT_COMMIT && table != nullptr) {
        for (const Pending& p : pending) {
            if (p.queue.size() > kQueueBytes) continue;
            Slot* s = cached_slot_of(p.queue);
            if (s == nullptr) continue;
            for (int m = 0; m < kMetrics; m++)
                if (p.values[m] != 0)
                    pg_atomic_fetch_add_u64(&s->values[m], static_cast<uint64>(p.values[m]));
        }
    } else if (event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT &&
               event != XACT_EVENT_PREPARE) {
        return;
    }
    pending.clear();  // no deallocation: nothing that can fail
}

}  // namespace

void count(std::string_view queue, Metric metric, int64 n) {
    if (table == nullptr || n == 0) return;
    for (Pending& p : pending)
        if (p.queue == queue) {
            p.values[static_cast<int>(metric)] += n;
            return;
        }
    Pending p{std::string(queue), {}};
    p.values[static_cast<int>(metric)] = n;
    pending.push_back(std::move(p));
}

void register_metrics_callback() { RegisterXactCallback(on_transaction_end, nullptr); }

std::vector<QueueMetrics> read_metrics() {
    std::vector<QueueMetrics> out;
    if (table == nullptr) return out;
    Slot* all = slots();
    for (int i = 0; i < table->count; i++) {
        Slot* s = &all[i];
        char name[kQueueBytes];
        uint16 length = 0;
        SpinLockAcquire(&table->lock);
        bool mine = s->database == MyDatabaseId;
        if (mine) {
            length = s->length;
            memcpy(name, s->queue, length);
        }
        SpinLockRelease(&table->lock);
        if (!mine) continue;
        QueueMetrics m{std::string(name, length), {}};
        for (int v = 0; v < kMetrics; v++) m.values[v] = pg_atomic_read_u64(&s->values[v]);
        out.push_back(std::move(m));
    }
    return out;
}

Size metrics_size() {
    return add_size(MAXALIGN(sizeof(Table)), mul_size(sizeof(Slot), static_cast<Size>(metrics_slots)));
}

void metrics_init(void* at, bool found) {
    table = static_cast<Table*>(at);
    if (found) return;
    memset(table, 0, metrics_size());
    SpinLockInit(&table->lock);
    table->count = metrics_slots;
    for (int i = 0; i < table->count; i++)
        for (int v = 0; v < kMetrics; v++) pg_atomic_init_u64(&slots()[i].values[v], 0);
}

}  // namespace wf::pg
