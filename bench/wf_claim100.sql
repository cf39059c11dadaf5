-- pg_wf, 100 jobs per call: claim 100 (one commit), complete the 100 with
-- wf_complete_many in one statement (another commit).
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(attempt), '{}') AS atts
  FROM wf_claim(:q, max_jobs => 100) \gset
SELECT count(*) FROM wf_complete_many(:q, :ids::bigint[], :atts::int[]);
