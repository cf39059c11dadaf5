-- One job per transaction.
\set n random(1, 1000000)
SELECT wf_enqueue(:q, jsonb_build_object('n', :n::int, 'to', 'user@example.com'));
