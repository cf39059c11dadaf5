# Shards moved and a tenant isolated while workers claim and complete: with
# wf_owner allowed to log in from the nodes (Citus moves a shard connecting
# as its owner) and shard_transfer_mode 'block_writes' (logical replication
# does not carry wf.claim, an UNLOGGED table), every job is done exactly
# once, at its first attempt: claims move with their shard, their owners
# (the clients) are still alive, and calls that reach the old node meanwhile
# fail with 40001 and are tried again.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c004', distribute => 1);
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

# Without a login for wf_owner, Citus refuses the move at once.
my $queue = 'moving';
my $shard = $q->("SELECT get_shard_id_for_distribution_column('wf.job', '$queue')");
my $placement = sub {
	$q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) WHERE shardid = $_[0]");
};
my $from = $placement->($shard);
my ($to) = grep { $_ != $from } map { $_->port } @workers;
my ($ret, $out, $err) = $coord->psql('postgres',
	"SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to, shard_transfer_mode => 'block_writes')");
like($err, qr/wf_owner/, 'without a login for wf_owner Citus refuses to move the shard');
is($placement->($shard), $from, 'and it stays');

$q->('ALTER ROLE wf_owner LOGIN');

my $jobs = 1500;
my $payloads = join(',', map { "{\"n\":$_}" } 1 .. $jobs);
$q->("SELECT count(*) FROM wf_enqueue_batch('$queue', '[$payloads]')");

my @clients = map { $coord->background_psql('postgres', on_error_stop => 0) } 1 .. 3;
my %done;
my $retried = 0;
# One round: each client claims one job and completes it.
my $round = sub {
	my $any = 0;
	for my $s (@clients)
	{
		my $row = $s->query("SELECT id || '|' || attempt FROM wf_claim('$queue')");
		if ($s->{stderr} =~ /40001|moved to another node/) { $retried++; $s->{stderr} = ''; next; }
		die "claim failed: $s->{stderr}" if $s->{stderr} ne '';
		next if $row eq '';
		$any = 1;
		my ($id, $attempt) = split /\|/, $row;
		for my $try (1 .. 50)
		{
			my $ok = $s->query("SELECT wf_complete('$queue', $id, $attempt)");
			if ($s->{stderr} =~ /40001|moved to another node/) { $retried++; $s->{stderr} = ''; next; }
			die "complete failed: $s->{stderr}" if $s->{stderr} ne '';
			die "completion of $id refused" unless $ok eq 't';
			$done{$id}++;
			last;
		}
	}
	return $any;
};

$round->() for 1 .. 50;

# A claim that waits on an empty queue of the same shard group does not
# hold the move back: it lets go of the group's lock while it sleeps.
my $idle = $q->("SELECT n FROM (SELECT 'idle' || g AS n FROM generate_series(1, 1000) g) s"
	  . " WHERE get_shard_id_for_distribution_column('wf.job', n) = $shard LIMIT 1");
my $sleeper = $coord->background_psql('postgres', on_error_stop => 0);
$sleeper->query_until(qr/sleeping/, "\\echo sleeping\nSELECT * FROM wf_claim('$idle', wait => '60 s');\n");
sleep 1;
my $t0 = Time::HiRes::time();
my $mover = $coord->background_psql('postgres');
$mover->query_until(qr/started/, "\\echo started\n"
	  . "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to, shard_transfer_mode => 'block_writes');\n");
$round->() for 1 .. 150;
$mover->quit;
my $move_secs = Time::HiRes::time() - $t0;
is($placement->($shard), $to, "the queue's shard group moved from $from to $to during the claims");
ok($move_secs < 30, sprintf('the move did not wait for the sleeping claim of %s (%.1f s)', $idle, $move_secs));
$sleeper->{run}->kill_kill;

# A hot queue gets a shard of its own (the group split three ways).
my $isolator = $coord->background_psql('postgres');
$isolator->query_until(qr/started/, "\\echo started\n"
	  . "SELECT isolate_tenant_to_new_shard('wf.job', '$queue', 'CASCADE', shard_transfer_mode => 'block_writes');\n");
$round->() for 1 .. 100;
$isolator->quit;
my $new_shard = $q->("SELECT get_shard_id_for_distribution_column('wf.job', '$queue')");
isnt($new_shard, $shard, "the queue was isolated into shard $new_shard");

1 while $round->();
$_->quit for @clients;
diag("calls tried again: $retried");
is(scalar(keys %done), $jobs, "all $jobs jobs done");
is(scalar(grep { $_ != 1 } values %done), 0, 'none twice');
is($q->("SELECT string_agg(DISTINCT status || ' ' || attempt, ',') FROM wf.jobs WHERE queue = '$queue'"),
	'done 1', 'each at its first attempt, as wf.jobs says');

$c->stop_all;
done_testing();
