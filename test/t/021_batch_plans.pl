# A batch costs linear time (issue 11, finding 9), checked by what the
# executor did rather than by a clock: a claim of 8,000 jobs and their
# completion in one call, from a queue filled after the last ANALYZE (its
# statistics say it is empty), must not compare every job of the batch with
# every other. auto_explain logs the plans of pg_wf's own statements with
# their actual row counts; no node may handle more than a few times the
# batch (a nested loop over the queue did 32 million comparisons). The
# completion has no plan any more: it finds each job and claim by key
# without the executor (src/pg/jobs/job_rows.cpp), so the claim's plan is
# what is left to check here, and the batch must still complete.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('batch_plans');
my $n = 8000;

# Claims and completes $n jobs of queue `fresh` in database $db with
# auto_explain on; returns the plans of pg_wf's own statements.
sub batch_plans
{
	my ($db) = @_;
	$node->safe_psql($db, qq{
SELECT count(*) FROM wf_enqueue_batch('fresh', (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, $n) g));
});
	my $offset = -s $node->logfile;
	my $done = $node->safe_psql($db, qq{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_timing = off;
CREATE TEMP TABLE c AS SELECT id, attempt FROM wf_claim('fresh', max_jobs => $n);
SELECT count(*) FROM wf_complete_many('fresh', (SELECT array_agg(id) FROM c), (SELECT array_agg(attempt) FROM c));
});
	is($done, $n, "$db: $n jobs claimed and completed in two calls");
	my $log = slurp_file($node->logfile, $offset);
	return grep { /wf\.(job|claim|ready)/ } split /LOG:  duration: /, $log;
}

# The most rows one plan node handled: its rows times its loops, or the
# rows a filter removed.
sub worst_node
{
	my ($worst, $where) = (0, '');
	for my $line (map { split /\n/ } @_)
	{
		my $work = 0;
		$work = $1 if $line =~ /Rows Removed by (?:Join )?Filter: (\d+)/;
		$work = $1 * $2 if $line =~ /actual rows=(\d+) loops=(\d+)/ && $1 * $2 > $work;
		($worst, $where) = ($work, $line) if $work > $worst;
	}
	return ($worst, $where);
}

# A database whose tables were never analyzed, and one whose statistics
# were taken before the queue was filled.
$node->safe_psql('postgres', 'CREATE DATABASE never_analyzed');
$node->safe_psql('never_analyzed', 'CREATE EXTENSION pg_wf');
$node->safe_psql('postgres', qq{
SELECT count(*) FROM wf_enqueue_batch('old', (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, 20000) g));
});
$node->safe_psql('postgres', 'VACUUM ANALYZE wf.job, wf.ready, wf.claim');
for my $db ('never_analyzed', 'postgres')
{
	my @plans = batch_plans($db);
	cmp_ok(scalar(@plans), '>=', 1, "$db: the plans of the claim were logged");
	my ($worst, $where) = worst_node(@plans);
	note("$db: the most rows one plan node handled: $worst ($where)");
	cmp_ok($worst, '<=', 4 * $n, "$db: no plan node handles more than a few times the batch")
	  or diag(join("\n----\n", @plans));
}

done_testing();
