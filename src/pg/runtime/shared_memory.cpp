// The hooks that request and lay out pg_wf's segment; what is in it belongs
// to the parts' owners.
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/rate_windows.hpp"
#include "pg/runtime/wakeup.hpp"
#include "pg/runtime/worker_registry.hpp"

namespace wf::pg {

namespace {

struct Part {
    Size (*size)();
    void (*init)(void* at, bool found);
};

const Part parts[] = {
    {worker_registry_size, worker_registry_init},
    {waiter_slots_size, waiter_slots_init},
    {rate_windows_size, rate_windows_init},
    {metrics_size, metrics_init},
};

bool ready = false;
shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

Size segment_size() {
    Size size = 0;
    for (const Part& part : parts) size = add_size(size, MAXALIGN(part.size()));
    return size;
}

void on_shmem_request() {
    if (previous_request_hook) previous_request_hook();
    RequestAddinShmemSpace(segment_size());
}

void on_shmem_startup() {
    if (previous_startup_hook) previous_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    char* at = static_cast<char*>(ShmemInitStruct("pg_wf", segment_size(), &found));
    for (const Part& part : parts) {
        part.init(at, found);
        at += MAXALIGN(part.size());
    }
    ready = true;
    LWLockRelease(AddinShmemInitLock);
}

}  // namespace

void request_shared_memory() {
    previous_request_hook = shmem_request_hook;
    shmem_request_hook = on_shmem_request;
    previous_startup_hook = shmem_startup_hook;
    shmem_startup_hook = on_shmem_startup;
}

bool shared_memory_ready() { return ready; }

}  // namespace wf::pg
