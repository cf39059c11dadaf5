// wf._metrics(): the counters of this database's queues (runtime/metrics.hpp),
// behind the view wf.metrics. Rows only for queues the reader holds a right
// on, also when the function is called directly.
#include "pg/api/frame.hpp"
#include "pg/runtime/metrics.hpp"

using namespace wf;
using namespace wf::pg;

// wf._metrics() -> TABLE(queue, enqueued, claimed, completed, failed,
// retried, recovered, cancelled, claim_waits, claim_wait_seconds)
WF_SQL_FUNCTION_ANY_SCAN(wf_metrics) {
    call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
    std::vector<QueueMetrics> all = read_metrics();
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    for (const QueueMetrics& m : all) {
        if (!reader_holds_right(std::nullopt, m.queue)) continue;
        Datum values[10];
        bool nulls[10] = {};
        values[0] = text_datum(m.queue);
        const Metric counters[] = {Metric::enqueued, Metric::claimed, Metric::completed,
                                   Metric::failed, Metric::retried, Metric::recovered,
                                   Metric::cancelled, Metric::claim_waits};
        for (int i = 0; i < 8; i++)
            values[i + 1] = Int64GetDatum(static_cast<int64>(m.values[static_cast<int>(counters[i])]));
        values[9] = Float8GetDatum(
            static_cast<double>(m.values[static_cast<int>(Metric::claim_wait_micros)]) / 1e6);
        call([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls); });
    }
    return 0;
}
