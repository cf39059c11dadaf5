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
StatementSettingsScope current = {kOutsideFunction, InvalidSubTransactionId, true};

bool already_so() {
    return (!current.index_scans_only || !enable_seqscan) && !jit_enabled &&
           namespace_search_path != nullptr && strcmp(namespace_search_path, kSearchPath) == 0;
}

void set(const char* name, const char* value) {
    set_config_option(name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

// A subtransaction begun before the pin and ending now takes the pinned
// level with it: the next statement pins again.
void on_subtransaction_end(SubXactEvent event, SubTransactionId ending, SubTransactionId, void*) {
    if ((event == SUBXACT_EVENT_COMMIT_SUB || event == SUBXACT_EVENT_ABORT_SUB) && current.level > 0 &&
        ending == current.pinned_in)
        current.level = kNotPinned;
}

}  // namespace

void pin_statement_settings() {
    if (current.level != kNotPinned) return;
    if (already_so()) {
        current.level = kAlreadySo;  // a pg_wf function running inside another's statement, say
        return;
    }
    static bool listening = false;
    if (!listening) {
        RegisterSubXactCallback(on_subtransaction_end, nullptr);
        listening = true;
    }
    // Recorded first: if a set fails, the abort restores the level.
    current.level = NewGUCNestLevel();
    current.pinned_in = GetCurrentSubTransactionId();
    set("search_path", kSearchPath);
    set("jit", "off");
    if (current.index_scans_only) set("enable_seqscan", "off");
}

StatementSettingsScope enter_statement_settings(bool index_scans_only) {
    StatementSettingsScope outer = current;
    current = {kNotPinned, InvalidSubTransactionId, index_scans_only};
    return outer;
}

void leave_statement_settings(const StatementSettingsScope& outer, bool returned) {
    int level = current.level;
    current = outer;
    if (returned && level > 0) AtEOXact_GUC(true, level);
}

}  // namespace wf::pg
