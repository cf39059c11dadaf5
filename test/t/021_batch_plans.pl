# A batch costs linear time (issue 11, finding 9), checked by what the
# executor did rather than by a clock: a claim of 8,000 jobs and their
# completion in one call, from a queue filled after the last ANALYZE (its
# statistics say it is empty), must not compare every job of the batch with
# every other. auto_explain logs the plans of pg_wf's own statements with
# their actual row counts; no node may handle more than a few times the
# batch (a nested loop over the queue did 32 million comparisons). The
# completion and a plain claim have no plan any more: they find each job
# and claim by key without the executor (src/pg/jobs/job_rows.cpp,
# claim_rows.cpp). What is left to check is the statement a claim runs for
# jobs that have inputs or checkpoints to read (here: a second attempt),
# and that the batch still completes.
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

my $explain = q{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_timing = off;
};

# The plans of pg_wf's own statements logged since $offset.
sub plans_since
{
	my ($offset) = @_;
	return grep { /wf\.(job|claim|ready|checkpoint)/ } split /LOG:  duration: /,
	  slurp_file($node->logfile, $offset);
}

# Claims $n jobs of queue `fresh` in database $db, fails them (to retry at
# once), claims them again and completes them, with auto_explain on.
# Returns the plans of pg_wf's own statements in the first claim and in the
# second claim and the completion.
sub batch_plans
{
	my ($db) = @_;
	$node->safe_psql($db, qq{
SELECT wf_configure_queue('fresh', backoff_base => '1 ms', backoff_max => '1 ms');
SELECT count(*) FROM wf_enqueue_batch('fresh', (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, $n) g));
});
	my $offset = -s $node->logfile;
	my $failed = $node->safe_psql($db, qq{$explain
CREATE TEMP TABLE c AS SELECT id, attempt FROM wf_claim('fresh', max_jobs => $n);
SELECT count(*) FILTER (WHERE wf_fail('fresh', id, attempt, 'again') = 'pending') FROM c;
});
	is($failed, $n, "$db: $n jobs claimed and failed, to run again");
	my @first = plans_since($offset);
	$offset = -s $node->logfile;
	my $done = $node->safe_psql($db, qq{$explain
SELECT pg_sleep(0.1) AS slept \\gset
CREATE TEMP TABLE c AS SELECT id, attempt FROM wf_claim('fresh', max_jobs => $n);
SELECT count(*) FROM wf_complete_many('fresh', (SELECT array_agg(id) FROM c), (SELECT array_agg(attempt) FROM c))
 WHERE (SELECT min(attempt) FROM c) = 2;
});
	is($done, $n, "$db: claimed again (attempt 2) and completed in two calls");
	return (\@first, [plans_since($offset)]);
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
	my ($first, $again) = batch_plans($db);
	# A first claim of plain jobs runs no SQL on pg_wf's tables at all
	# (src/pg/jobs/claim_rows.cpp); wf_fail's statements run per job, none
	# of them over the batch.
	is(scalar(grep { /wf_claim|unnest/ } @$first), 0, "$db: a first claim of plain jobs runs no statement");
	# A later attempt's claim reads its checkpoints: one statement for the batch.
	cmp_ok(scalar(grep { /wf\.checkpoint/ } @$again), '>=', 1,
		"$db: the plan of the claim's read of checkpoints was logged");
	my ($worst, $where) = worst_node(@$first, @$again);
	note("$db: the most rows one plan node handled: $worst ($where)");
	cmp_ok($worst, '<=', 4 * $n, "$db: no plan node handles more than a few times the batch")
	  or diag(join("\n----\n", @$first, @$again));
}

done_testing();
