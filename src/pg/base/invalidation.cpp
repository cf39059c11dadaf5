#include "pg/base/invalidation.hpp"

extern "C" {
#include "utils/inval.h"
}

namespace wf::pg {
namespace {

constexpr int kMaxListeners = 8;
RelcacheCallbackFunction listeners[kMaxListeners];
int listener_count = 0;

void dispatch(Datum arg, Oid relid) {
    for (int i = 0; i < listener_count; i++) listeners[i](arg, relid);
}

}  // namespace

void listen_to_relcache(RelcacheCallbackFunction listener) {
    for (int i = 0; i < listener_count; i++)
        if (listeners[i] == listener) return;
    if (listener_count == 0) CacheRegisterRelcacheCallback(dispatch, 0);
    if (listener_count == kMaxListeners) elog(ERROR, "pg_wf: too many relcache listeners");
    listeners[listener_count++] = listener;
}

}  // namespace wf::pg
