-- Baseline worker loop, one job per call: the SKIP LOCKED claim (one commit),
-- then mark it done (another). An empty claim yields id 0: a no-op UPDATE.
WITH c AS (
    UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
     WHERE id = (SELECT id FROM baseline_jobs
                  WHERE status = 'pending' AND queue = :q AND run_at <= now()
                  ORDER BY priority DESC, run_at, id
                  FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id, attempts, payload)
SELECT coalesce(max(id), 0) AS id FROM c \gset
UPDATE baseline_jobs SET status = 'done', finished_at = now() WHERE id = :id;
