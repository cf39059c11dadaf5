-- pg_wf worker loop with one round trip and one commit per job: complete the
-- job in hand and claim the next. Run with -D id=0 -D attempt=0: the first
-- call completes nothing (a stale token) and only claims.
SELECT coalesce(max(id), 0) AS id, coalesce(max(attempt), 0) AS attempt
  FROM wf_complete_and_claim(:q, :id, :attempt) \gset
