-- Baseline worker loop with one round trip and one commit per job: one
-- statement marks the job in hand done and claims the next. Run with -D id=0.
WITH d AS (
    UPDATE baseline_jobs SET status = 'done', finished_at = now()
     WHERE id = :id AND status = 'running'),
c AS (
    UPDATE baseline_jobs SET status = 'running', attempts = attempts + 1, started_at = now()
     WHERE id = (SELECT id FROM baseline_jobs
                  WHERE status = 'pending' AND queue = :q AND run_at <= now()
                  ORDER BY priority DESC, run_at, id
                  FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id, attempts, payload)
SELECT coalesce(max(id), 0) AS id FROM c \gset
