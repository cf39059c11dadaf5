# wf.retention: the worker deletes finished jobs older than the setting, in
# small batches, with their dependency edges and idempotency keys; it never
# touches unfinished jobs, however old. -1 keeps everything.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('retention', sweep_interval => '100ms', conf => "wf.retention = -1\n");
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

# 2,500 finished jobs (more than one batch), a few unfinished ones, a DAG
# edge and an idempotency key.
$node->safe_psql('postgres', q{
  SELECT count(*) FROM wf_enqueue_batch('old', (SELECT jsonb_agg(g) FROM generate_series(1, 2500) g));
  SELECT count(*) FROM wf_complete_many('old', ARRAY(SELECT id FROM wf_claim('old', max_jobs => 2500)),
                                        array_fill(1, ARRAY[2500]));
  SELECT wf_enqueue('keyed', '{"v":1}', idempotency_key => 'k-1');
  SELECT wf_complete('keyed', id, attempt) FROM wf_claim('keyed');
  SELECT wf_enqueue('dag', '{}', step_name => 'parent');
  SELECT wf_complete('dag', id, attempt) FROM wf_claim('dag');
  SELECT wf_enqueue('dag', '{}', step_name => 'child',
                    depends_on => ARRAY[(SELECT id FROM wf.jobs WHERE step_name = 'parent')]);
  SELECT wf_enqueue('waiting', '{}', run_at => now() + interval '1 day');
  SELECT wf_enqueue('held', '{}');
  SELECT count(*) FROM wf_claim('held');
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'), '2505', 'all jobs there');

sleep 1;
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.jobs'),
	'2505', 'wf.retention = -1 keeps finished jobs');

$node->append_conf('postgresql.conf', "wf.retention = '1s'\n");
$node->reload;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM wf.jobs WHERE status IN ('done', 'failed', 'cancelled')"),
	'after a reload every finished job past retention is deleted');
is( $node->safe_psql('postgres',
		"SELECT string_agg(queue || ':' || status, ',' ORDER BY queue) FROM wf.jobs"),
	'dag:pending,held:pending,waiting:pending',
	'unfinished jobs stay, whatever their age (held was recovered when its session ended)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.dependency'),
	'0', 'the edges of deleted jobs are gone');

# The key went with its job: the same key makes a new job now.
my $old_id = $node->safe_psql('postgres', "SELECT max(id) FROM wf.job WHERE queue = 'keyed'");
is($old_id, '', 'the keyed job was deleted');
my $new = $node->safe_psql('postgres', q{SELECT wf_enqueue('keyed', '{"v":2}', idempotency_key => 'k-1')});
ok($new > 0, 'after retention an idempotency key can be used again');

# Jobs that finish now are kept for the retention period, then go too.
$node->safe_psql('postgres', q{SELECT wf_complete('keyed', id, attempt) FROM wf_claim('keyed')});
is($node->safe_psql('postgres', "SELECT status FROM wf.jobs WHERE id = $new"),
	'done', 'a job that just finished is still there');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM wf.jobs WHERE id = $new"),
	'and is deleted once it is older than wf.retention');

$node->stop;
done_testing();
