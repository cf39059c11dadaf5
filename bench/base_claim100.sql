-- Baseline, 100 jobs per call: LIMIT 100 SKIP LOCKED claim (one commit), one
-- UPDATE ... = ANY marks them done (another). ARRAY(...) runs the locking
-- subquery once (an InitPlan), whatever the planner's estimates.
WITH c AS (
    UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
     WHERE id = ANY(ARRAY(SELECT id FROM baseline_jobs
                           WHERE status = 'pending' AND queue = :q AND run_at <= now()
                           ORDER BY priority DESC, run_at, id
                           FOR UPDATE SKIP LOCKED LIMIT 100))
    RETURNING id, attempts, payload)
SELECT coalesce(array_agg(id), '{}') AS ids FROM c \gset
UPDATE baseline_jobs SET status = 'done', finished_at = now() WHERE id = ANY(:ids::bigint[]);
