-- Baseline on a DAG: every job is `pending` with a depends_on array; the
-- claim takes the first one none of whose dependencies is unfinished.
WITH c AS (
    UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
     WHERE id = (SELECT j.id FROM baseline_jobs j
                  WHERE j.status = 'pending' AND j.queue = :q AND j.run_at <= now()
                    AND NOT EXISTS (SELECT 1 FROM baseline_jobs p
                                     WHERE p.id = ANY(j.depends_on) AND p.status <> 'done')
                  ORDER BY j.priority DESC, j.run_at, j.id
                  FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id, attempts, payload)
SELECT coalesce(max(id), 0) AS id FROM c \gset
UPDATE baseline_jobs SET status = 'done', finished_at = now() WHERE id = :id;
