# The background worker's statements stay cheap when the tables grow under
# plans made while they were empty. The worker prepares its statements once
# and keeps their plans until a table's statistics change; with autovacuum
# off (or before it visits), a plan made at the first pass, when wf.job
# looked empty, serves a million jobs. A plan led by wf.job then reads it
# whole at every pass, and its snapshot, held all that time, keeps claims
# from skipping the dead entries of the ready index: the check for release
# debts left did that until 1.11 (a join led by wf.job, probing the debts
# once per job row).
#
# pg_stat_statements counts every statement the worker runs (they run
# through SPI): with 60,000 jobs queued, and some of them running, held
# by a session, none may read more than a few hundred buffers per call.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('worker_plans', sweep_interval => '50ms', conf => <<'CONF');
autovacuum = off
shared_preload_libraries = 'pg_wf, pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_utility = off
CONF
# (The second shared_preload_libraries line is the one that counts.)
$node->safe_psql('postgres', 'CREATE EXTENSION pg_stat_statements');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');
# Passes over an empty wf.job: the worker's plans are made now.
sleep 1;

$node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_enqueue_batch('wp', (SELECT jsonb_agg(g) FROM generate_series(1, 60000) g))});
is($node->safe_psql('postgres', q{SELECT relpages FROM pg_class WHERE oid = 'wf.job'::regclass}),
	'0', 'wf.job was never analyzed: the plans made empty stand');
# A session holds claims: the sweep looks at running jobs.
my $worker = $node->background_psql('postgres');
is($worker->query_safe(q{SELECT count(*) FROM wf_claim('wp', max_jobs => 50)}), '50', 'claims held');
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
# Many passes (every 50 ms).
sleep 2;
my $worst = $node->safe_psql('postgres', q{
	SELECT coalesce(max((shared_blks_hit + shared_blks_read) / calls), 0) || ' '
	       || coalesce(sum(calls), 0) || E'\n'
	       || coalesce(string_agg(left(regexp_replace(query, '\s+', ' ', 'g'), 120) || ': '
	                              || (shared_blks_hit + shared_blks_read) / calls || ' buffers per call',
	                              E'\n') FILTER (WHERE (shared_blks_hit + shared_blks_read) / calls > 300), '')
	  FROM pg_stat_statements
	 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'postgres')
	   AND query NOT LIKE '%pg_stat_statements%' AND calls > 0});
my ($first, @heavy) = split /\n/, $worst;
my ($max_per_call, $calls) = split / /, $first;
note("the most a statement read per call: $max_per_call buffers, in $calls calls");
cmp_ok($calls, '>', 20, 'the worker ran its passes');
cmp_ok($max_per_call, '<=', 300, 'no statement of the worker read more than 300 buffers per call')
  or diag(join("\n", @heavy));
$worker->quit;

$node->stop;
done_testing();
