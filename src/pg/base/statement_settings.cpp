#include "pg/base/statement_settings.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "jit/jit.h"
#include "optimizer/cost.h"
#include "utils/guc.h"
}

namespace wf::pg {
namespace {

constexpr const char* kSearchPath = "pg_catalog, pg_temp";

// The innermost pg_wf SQL function's state: the GUC level its settings
// were pinned in (> 0), or one of these.
constexpr int kOutsideFunction = -1;  // none running (the worker)
constexpr int kNotPinned = 0;         // one running, no statement yet
constexpr int kAlreadySo = -2;        // one running, the settings were already these
int current = kOutsideFunction;

bool already_so() {
    return !enable_seqscan && !jit_enabled && namespace_search_path != nullptr &&
           strcmp(namespace_search_path, kSearchPath) == 0;
}

void set(const char* name, const char* value) {
    set_config_option(name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

}  // namespace

void pin_statement_settings() {
    if (current != kNotPinned) return;
    if (already_so()) {
        current = kAlreadySo;  // a pg_wf function running inside another's statement, say
        return;
    }
    // Recorded first: if a set fails, the abort restores the level.
    current = NewGUCNestLevel();
    set("search_path", kSearchPath);
    set("enable_seqscan", "off");
    set("jit", "off");
}

int enter_statement_settings() {
    int outer = current;
    current = kNotPinned;
    return outer;
}

void leave_statement_settings(int outer, bool returned) {
    int level = current;
    current = outer;
    if (returned && level > 0) AtEOXact_GUC(true, level);
}

}  // namespace wf::pg
