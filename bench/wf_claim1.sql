-- pg_wf worker loop, one job per call: claim (one commit), complete (another).
-- An empty claim yields id 0, whose wf_complete is a harmless false.
SELECT coalesce(max(id), 0) AS id, coalesce(max(attempt), 0) AS attempt
  FROM wf_claim(:q, max_jobs => 1) \gset
SELECT wf_complete(:q, :id, :attempt);
