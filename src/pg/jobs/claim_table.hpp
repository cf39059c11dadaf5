// Ending claims (wf.claim rows) without the executor.
#pragma once

#include <vector>

#include "pg/base/postgres.hpp"

namespace wf::pg {

// Deletes the claims of jobs `ids` of `queue`, one index descent of
// claim_pkey each. The caller has already locked the jobs' rows (ended
// their attempts), so only a lease renewal can be writing one of these
// claims: the delete waits for it, as the executor would, and in READ
// COMMITTED deletes the renewed row (in REPEATABLE READ or SERIALIZABLE,
// 40001). Through SQL the same delete of a batch was planned, for a table
// whose statistics say one row, as a scan of the queue's whole range of
// claim_pkey with the ids as a filter.
void end_claims(Datum queue, const std::vector<int64>& ids);

}  // namespace wf::pg
