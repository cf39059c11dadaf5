#include "pg/citus/ownership.hpp"

#include "pg/base/spi.hpp"

namespace wf::pg {
namespace {

int64 origin_key = 0;

PreparedStatement backend_gpid("SELECT pg_catalog.citus_backend_gpid() AS gpid", {});

PreparedStatement running_gpids(
    "SELECT DISTINCT global_pid AS gpid FROM pg_catalog.citus_stat_activity"
    " WHERE global_pid = ANY ($1)", {INT8ARRAYOID});

// Runs a statement as the background worker's own role (Citus connects to
// the other nodes as the current user).
class RunAsWorkerRole {
public:
    RunAsWorkerRole() {
        GetUserIdAndSecContext(&saved_user_, &saved_context_);
        SetUserIdAndSecContext(GetAuthenticatedUserId(), saved_context_);
    }
    ~RunAsWorkerRole() { SetUserIdAndSecContext(saved_user_, saved_context_); }

private:
    Oid saved_user_;
    int saved_context_;
};

}  // namespace

int64 citus_origin_owner_key() {
    if (origin_key == 0) origin_key = -backend_gpid.execute().int64_at(0, "gpid");
    return origin_key;
}

std::vector<int64> without_live_origins(const std::vector<int64>& dead) {
    std::vector<int64> gpids;
    for (int64 key : dead)
        if (key < 0) gpids.push_back(-key);
    if (gpids.empty() || !IsBackgroundWorker) return dead;
    std::vector<int64> running;
    {
        RunAsWorkerRole as_worker;
        Params<1> p;
        p.set(0, int8_array(gpids));
        running = running_gpids.execute(p.values, p.nulls).int64_column("gpid");
    }
    std::vector<int64> still_dead;
    for (int64 key : dead)
        if (key >= 0 || std::find(running.begin(), running.end(), -key) == running.end())
            still_dead.push_back(key);
    return still_dead;
}

}  // namespace wf::pg
