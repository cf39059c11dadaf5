#include "pg/runtime/run_as.hpp"

namespace wf::pg {
namespace {
Oid current_caller = InvalidOid;  // set while a RunAsOwner lives
}

RunAsOwner::RunAsOwner(Oid owner) {
    GetUserIdAndSecContext(&saved_user_, &saved_context_);
    saved_caller_ = current_caller;
    if (!OidIsValid(current_caller)) current_caller = saved_user_;
    SetUserIdAndSecContext(owner, saved_context_ | SECURITY_LOCAL_USERID_CHANGE |
                                      SECURITY_RESTRICTED_OPERATION);
}

RunAsOwner::~RunAsOwner() {
    SetUserIdAndSecContext(saved_user_, saved_context_);
    current_caller = saved_caller_;
}

Oid RunAsOwner::caller() { return OidIsValid(current_caller) ? current_caller : GetUserId(); }

}  // namespace wf::pg
