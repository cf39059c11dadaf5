// pg_wf's SQL runs as pg_wf's owner (the role wf_owner, which owns schema
// wf and its tables and cannot log in), never with its caller's rights and
// never as a superuser: a caller needs no privilege on pg_wf's tables, and
// nothing it could plant runs with more than wf_owner's rights. Like
// VACUUM running an index function as the table's owner, the switch is a
// security-restricted operation (no SET ROLE, no temporary objects inside).
// The caller is remembered, for the rights checks (rights.hpp).
#pragma once

#include "pg/base/postgres.hpp"

namespace wf::pg {

class RunAsOwner {
public:
    explicit RunAsOwner(Oid owner);
    ~RunAsOwner();  // restores the caller (an error restores it too, by aborting)
    RunAsOwner(const RunAsOwner&) = delete;
    RunAsOwner& operator=(const RunAsOwner&) = delete;

    // The role that called into pg_wf: GetUserId() outside any RunAsOwner.
    static Oid caller();

private:
    Oid saved_user_;
    int saved_context_;
    Oid saved_caller_;
};

}  // namespace wf::pg
