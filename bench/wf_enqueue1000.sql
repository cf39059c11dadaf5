-- 1,000 jobs per call from one JSON array (built server-side, as for the baseline).
SELECT count(*) FROM wf_enqueue_batch(:q,
    (SELECT jsonb_agg(jsonb_build_object('n', g, 'to', 'user@example.com'))
       FROM generate_series(1, 1000) g));
