# README.md's examples run as written, in order, and print what their
# comments say.
#
# Every ```sql block runs, in README order, in ONE psql session on a fresh
# database `app` (the database the README's Python worker connects to), as
# the node's superuser, the way a reader pastes it: each statement verbatim.
# The test only adds psql meta-commands around each statement, to read its
# output (csv) and whether it failed. The ```python blocks run at their
# place in that sequence (see PYTHON below); the other blocks are listed in
# @skip with the reason, and a block the test neither runs nor lists fails.
# The untagged block that begins "# postgresql.conf" is the node's
# configuration: the node is started with it (plus timezone = 'UTC', the
# zone the README's times are written in).
#
# THE CONVENTION for the comments of a ```sql block (README.md follows it):
#  - A statement ends at its `;`, and only a comment may follow it on that
#    line: `-- X`, the statement's TRAILING COMMENT.
#  - If the statement returns rows (a SELECT), X states its output. Its rows
#    as psql prints them (t/f, jsonb as text, a NULL as NULL), with ' | '
#    between columns and ', ' between rows ("(0 rows)" for none), are X, or
#    X begins with them and goes on with ': ' or ' (' and a why:
#    "-- t: still yours", "-- 3, 4 (2 is not due yet)". So a statement that
#    returns rows carries no other trailing comment: prose about it goes on
#    a line of its own.
#  - A TABLE: the lines right after the statement's last line that begin
#    with `--  ` (two dashes, two spaces) are its output as psql's aligned
#    format prints it: the column names, then one line per row (every row),
#    cells separated by `|`, without the separator line and the row count.
#    Cells are compared trimmed; an empty cell is a NULL or an empty string.
#  - In X and in a cell, `…` stands for one or more characters other than
#    `|` and `,`: for what changes from run to run (a uuid, a time, a date).
#  - `-- ERROR: M` states that the statement fails with an error whose
#    message begins with M. Any other statement that fails fails the test.
#  - A statement that returns no rows (CREATE, SET, ALTER ...) has no output
#    to state: its trailing comment is prose, unless it is an ERROR: one.
# Comment lines of their own (other than a table) are prose: not checked.
#
# PYTHON: every ```python block must compile (errors name README lines).
# It then runs (the README has one: the emails worker) with
# test/readme/run_block.py, which gives it what the README leaves to its
# reader (send_email(), the table `sent`), until the emails it has to send
# are sent (at most 20 s): the emails job the tour left pending for a
# retry, and two enqueued here, one of which fails once.
#
# A mismatch fails with the README.md line of the statement (and prints
# what it printed); they come in README order.
use strict;
use warnings FATAL => 'all';
use utf8;
use FindBin;
use lib $FindBin::RealBin;
use Encode qw(decode encode);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

# Test::More's output is bytes: README text goes out as UTF-8.
sub u { return encode('UTF-8', join('', @_)); }
sub d { return diag(u(@_)); }
sub n { return note(u(@_)); }

my $started = now_s();
my $root = "$FindBin::RealBin/../..";
my $python = '/usr/bin/python3';

# Blocks not run: language, how the first line begins, and why.
my @skip = (
	[ 'sh', 'scripts/demo.sh',
		'shell commands that build, install and run the demo (its own cluster, '
		  . 'minutes) and every test suite (this test among them)' ],
	[ 'sh', 'make && sudo make install',
		'the build and install this test runs on (scripts/test.sh does them first)' ],
	[ '', 'sql/pg_wf.sql ', 'the Layout: a list of files, not code' ],
	[ 'psql', '-- On the Citus coordinator', 'needs a Citus cluster: test/citus/ (scripts/test.sh '
		  . 'citus) runs wf_distribute, shard moves and tenant isolation on a coordinator and two workers' ],
	[ 'js', '// worker.mjs', 'the TypeScript worker: clients/typescript/test/readme.test.ts runs it '
		  . 'as written (scripts/test.sh clients)' ],
	[ 'yaml', '# queries.yaml of postgres_exporter',
		'a postgres_exporter configuration; its query reads wf.metrics, whose '
		  . 'counters pg_regress operate_bulk checks' ],
);

# ---- README.md's fenced blocks ----
open my $fh, '<:encoding(UTF-8)', "$root/README.md" or die "README.md: $!";
my @readme = <$fh>;
close $fh;
chomp @readme;
my (@blocks, $open);
for my $i (0 .. $#readme)
{
	my $l = $readme[$i];
	if (!$open && $l =~ /^```(\S*)\s*$/)
	{
		$open = { lang => $1, line => $i + 2, lines => [] };
	}
	elsif ($open && $l =~ /^```\s*$/)
	{
		push @blocks, $open;
		undef $open;
	}
	elsif ($open)
	{
		push @{ $open->{lines} }, $l;
	}
}
die "README.md: the block opened at line $open->{line} is not closed" if $open;

my ($conf_block) =
  grep { $_->{lang} eq '' && ($_->{lines}[0] // '') eq '# postgresql.conf' } @blocks;
ok($conf_block, 'README.md has the postgresql.conf block')
  or BAIL_OUT('no postgresql.conf block in README.md');

# ---- the node, configured by the README ----
my $node = wf_node(
	'readme',
	preload => 0,
	no_extension => 1,
	conf => join("\n", @{ $conf_block->{lines} }, "timezone = 'UTC'", ''));
$node->safe_psql('postgres', 'CREATE DATABASE app');
my $psql = $node->background_psql('app', on_error_stop => 0, timeout => 60);
my $backend = $psql->query_safe('SELECT pg_backend_pid()');
# csv output, with a NULL that no value prints (\001).
$psql->{stdin} .= "\\pset format csv\n\\pset tuples_only off\n\\pset null '\\001'\n";

my $seq = 0;
for my $blk (@blocks)
{
	my $first = $blk->{lines}[0] // '';
	my $where = "README.md:$blk->{line}";
	if ($blk->{lang} eq 'sql')
	{
		run_sql_block($blk);
	}
	elsif ($blk->{lang} eq 'python')
	{
		run_python_block($blk);
	}
	elsif ($blk == $conf_block)
	{
		is($node->safe_psql('postgres', 'SHOW shared_preload_libraries'), 'pg_wf',
			"$where: the node runs with the README's postgresql.conf");
	}
	elsif (my ($sk) = grep { $_->[0] eq $blk->{lang} && index($first, $_->[1]) == 0 } @skip)
	{
		my $why = $sk->[2];
		n("$where: ```$blk->{lang} block not run: $why");
	}
	else
	{
		fail(u("$where: a ```$blk->{lang} block (\"$first\") that this test neither "
			  . 'runs nor lists in @skip with a reason'));
	}
}
$psql->quit;
n(sprintf('README examples ran in %.1f s', now_s() - $started));
done_testing();

# ---- SQL ----

# Splits a block into statements: {text, line (first), end (line of the `;`),
# trailing (X of `-- X`, or undef), table (lines after `--  `)}.
sub split_sql
{
	my ($blk) = @_;
	my @l = @{ $blk->{lines} };
	my $src = join("\n", @l) . "\n";
	my (@st, $start);
	my $i = 0;
	my $n = length $src;
	my $line_at = sub {    # README line of offset $_[0]
		my $k = substr($src, 0, $_[0]) =~ tr/\n//;
		return $blk->{line} + $k;
	};
	while ($i < $n)
	{
		my $c = substr($src, $i, 1);
		my $two = substr($src, $i, 2);
		if ($two eq '--')
		{
			my $e = index($src, "\n", $i);
			$i = $e;
			next;
		}
		if ($two eq '/*')
		{
			my $e = index($src, '*/', $i + 2);
			die 'README.md:' . $line_at->($i) . ': unclosed /* comment' if $e < 0;
			$i = $e + 2;
			next;
		}
		if ($c =~ /\s/) { $i++; next; }
		if (!defined $start && $c eq '\\')
		{
			die 'README.md:' . $line_at->($i)
			  . ': a psql meta-command: this test does not run those yet';
		}
		$start //= $i;
		if ($c eq "'" || $c eq '"')
		{
			my $esc = $c eq "'" && $i > 0 && substr($src, $i - 1, 1) =~ /[eE]/
			  && ($i < 2 || substr($src, $i - 2, 1) !~ /\w/);
			my $j = $i + 1;
			while (1)
			{
				die 'README.md:' . $line_at->($i) . ": unclosed $c" if $j >= $n;
				my $d = substr($src, $j, 1);
				if ($esc && $d eq '\\') { $j += 2; next; }
				if ($d eq $c)
				{
					if (substr($src, $j + 1, 1) eq $c) { $j += 2; next; }
					last;
				}
				$j++;
			}
			$i = $j + 1;
			next;
		}
		if ($c eq '$' && substr($src, $i) =~ /^(\$(?:[A-Za-z_]\w*)?\$)/)
		{
			my $tag = $1;
			my $e = index($src, $tag, $i + length $tag);
			die 'README.md:' . $line_at->($i) . ": unclosed $tag" if $e < 0;
			$i = $e + length $tag;
			next;
		}
		if ($c eq ';')
		{
			my $eol = index($src, "\n", $i);
			my $rest = substr($src, $i + 1, $eol - $i - 1);
			my $end = $line_at->($i);
			die "README.md:$end: more than a comment after a statement's `;`"
			  unless $rest =~ /^\s*(?:--\s*(.*?))?\s*$/;
			my $trailing = $1;
			my @table;
			for (my $k = $end - $blk->{line} + 1; $k < @l && $l[$k] =~ /^--  (.*)$/; $k++)
			{
				push @table, $1;
			}
			push @st, {
				text => substr($src, $start, $i + 1 - $start),
				line => $line_at->($start),
				end => $end,
				trailing => $trailing,
				table => @table ? \@table : undef,
			};
			undef $start;
			$i = $eol;
			next;
		}
		$i++;
	}
	die 'README.md:' . $line_at->($start) . ': a statement without its `;`'
	  if defined $start;
	return @st;
}

sub parse_csv
{
	my ($s) = @_;
	my (@rows, @row);
	my $f = '';
	while (length $s)
	{
		if ($s =~ s/^"((?:[^"]+|"")*)"//) { $f .= $1 =~ s/""/"/gr; next; }
		if ($s =~ s/^([^",\n]+)//) { $f .= $1; next; }
		if ($s =~ s/^,//) { push @row, $f; $f = ''; next; }
		if ($s =~ s/^\n//) { push @row, $f; push @rows, [@row]; @row = (); $f = ''; next; }
		die "bad csv from psql: $s";
	}
	return @rows;
}

# The pattern of an expected text, `…` standing for [^|,]+.
sub pattern
{
	my ($x) = @_;
	my $re = join('[^|,]+', map { quotemeta } split(/…/, $x, -1));
	return qr/^$re\z/s;
}

sub trailing_matches
{
	my ($x, $got) = @_;
	my @cand = ($x);
	push @cand, substr($x, 0, $-[0]) while $x =~ /(?=: | \()/g;
	for my $c (@cand)
	{
		return 1 if length $c && $got =~ pattern($c);
	}
	return 0;
}

# () if the table shows what was printed, else (the line of the first
# difference, counted from the table's header line, and what differs).
sub table_mismatch
{
	my ($table, $cols, $rows) = @_;
	my @t = map { [ map { s/^\s+|\s+$//gr } split(/\|/, $_, -1) ] } @$table;
	my $head = shift @t;
	return (0, 'its columns are ' . join(' | ', @$cols))
	  unless "@$head" eq "@$cols" && @$head == @$cols;
	for my $r (0 .. $#t)
	{
		return ($r + 1, 'it printed ' . scalar(@$rows) . ' rows') if $r > $#$rows;
		return ($r + 1, sprintf('%d cells, not %d', scalar @{ $t[$r] }, scalar @$cols))
		  unless @{ $t[$r] } == @$cols;
		for my $c (0 .. $#$cols)
		{
			my ($want, $v) = ($t[$r][$c], $rows->[$r][$c]);
			next if $want eq '' && (!defined $v || $v eq '');
			return ($r + 1, sprintf('%s is %s, not %s', $cols->[$c], $v // 'NULL', $want))
			  unless defined $v && $want ne '' && $v =~ pattern($want);
		}
	}
	return (scalar @t + 1, sprintf('it printed %d rows, the table shows %d', scalar @$rows, scalar @t))
	  unless @t == @$rows;
	return ();
}

sub render
{
	my ($rows) = @_;
	return '(0 rows)' unless @$rows;
	return join(', ', map { join(' | ', map { $_ // 'NULL' } @$_) } @$rows);
}

sub run_sql_block
{
	my ($blk) = @_;
	my @st = split_sql($blk);
	my $script = '';
	for my $s (@st)
	{
		$s->{n} = ++$seq;
		my $m = "\@\@readme-$s->{n}";
		$script .= "\\echo $m-begin\n\\warn $m-begin\n$s->{text}\n"
		  . "\\echo $m-end :ERROR\n\\echo :LAST_ERROR_MESSAGE\n\\echo $m-fin\n\\warn $m-fin\n";
	}
	my $last = "\@\@readme-$seq-fin\n";
	$psql->{stdin} .= $script;
	$psql->{run}->pump
	  until (index($psql->{stdout}, $last) >= 0 && index($psql->{stderr}, $last) >= 0)
	  || $psql->{timeout}->is_expired;
	die "README.md:$blk->{line}: psql did not finish the block" if $psql->{timeout}->is_expired;
	my $out = decode('UTF-8', $psql->{stdout});
	my $err = decode('UTF-8', $psql->{stderr});
	$psql->{stdout} = $psql->{stderr} = '';
	for my $s (@st)
	{
		my $m = "\@\@readme-$s->{n}";
		$out =~ /\Q$m\E-begin\n(.*?)\Q$m\E-end (true|false)\n(.*?)\n\Q$m\E-fin\n/s
		  or die "README.md:$s->{line}: no output markers for the statement";
		my ($csv, $failed, $message) = ($1, $2 eq 'true', $3);
		my ($stderr) = $err =~ /\Q$m\E-begin\n(.*?)\Q$m\E-fin\n/s;
		check_statement($s, $csv, $failed, $message, $stderr // '');
	}
}

sub check_statement
{
	my ($s, $csv, $failed, $message, $stderr) = @_;
	my $x = $s->{trailing};
	my $name = "README.md:$s->{end}: " . ((split /\n/, $s->{text})[0] =~ s/\s+$//r);
	$name = substr($name, 0, 100) . '…' if length $name > 100;
	$name = u($name);
	n("README.md:$s->{line}: $stderr") if $stderr ne '' && !$failed;
	if (defined $x && $x =~ /^ERROR:\s*(.*)$/)
	{
		my $want = $1;
		ok($failed && index($message, $want) == 0, "$name fails as its comment says")
		  or d($failed ? "it failed with: $message" : 'it did not fail');
		return;
	}
	if ($failed)
	{
		fail("$name runs");
		d("README.md:$s->{line}: an error no comment announces:\n$stderr");
		return;
	}
	my @rows = map { [ map { $_ eq "\001" ? undef : $_ } @$_ ] } parse_csv($csv);
	my $cols = shift @rows;
	if (!$cols)    # a command: no output, its comment is prose
	{
		if ($s->{table})
		{
			fail("$name prints the table below it");
			d('it returns no rows');
		}
		else
		{
			pass("$name runs");
		}
		return;
	}
	if (!defined $x && !$s->{table})
	{
		pass("$name runs");
		return;
	}
	if (defined $x)
	{
		my $got = render(\@rows);
		ok(trailing_matches($x, $got), "$name prints what its comment says")
		  or d("comment: -- $x\nprinted: $got");
	}
	if ($s->{table})
	{
		my ($at, $bad) = table_mismatch($s->{table}, $cols, \@rows);
		ok(!defined $bad, "$name prints the table below it")
		  or d('README.md:' . ($s->{end} + 1 + $at) . ": $bad\nprinted:\n"
			  . join(' | ', @$cols) . "\n"
			  . join("\n", map { join(' | ', map { $_ // '' } @$_) } @rows));
	}
}

# ---- Python ----

sub run_python_block
{
	my ($blk) = @_;
	my $where = "README.md:$blk->{line}";
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $file = "$dir/readme_$blk->{line}.py";
	open my $py, '>:encoding(UTF-8)', $file or die "$file: $!";
	print $py "\n" x ($blk->{line} - 1), join("\n", @{ $blk->{lines} }), "\n";
	close $py;
	my ($out, $err) = ('', '');
	my $compiled = IPC::Run::run(
		[ $python, '-c', 'import sys; compile(open(sys.argv[1], encoding="utf-8").read(), "README.md", "exec")', $file ],
		'>', \$out, '2>', \$err);
	ok($compiled, "$where: the ```python block compiles") or d($err);
	return unless $compiled;

	# Its work: the tour's job 3 (pending, to be retried), and two more.
	$node->safe_psql('app', q{
CREATE TABLE sent (message_id text);
SELECT wf_enqueue('emails', '{"to": "eve@example.com"}');
SELECT wf_enqueue('emails', '{"to": "flaky@example.com"}');
});
	# Done: every emails job is done, but the one due in 5 minutes and the
	# one the psql session holds.
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	# The README's worker uses the Python library from this repository.
	local $ENV{PYTHONPATH} = "$root/clients/python";
	local $ENV{README_TIMEOUT} = '20';
	local $ENV{README_DONE_SQL} = "SELECT NOT EXISTS (SELECT 1 FROM wf.jobs WHERE queue = 'emails'"
	  . " AND status <> 'done' AND NOT (status = 'pending' AND run_at > now() + interval '1 minute')"
	  . " AND NOT (status = 'running' AND owner_pid = $backend))";
	($out, $err) = ('', '');
	my $t = now_s();
	my $ran = IPC::Run::run([ $python, "$root/test/readme/run_block.py", $file ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(40));
	ok($ran && $out =~ /^done$/m, "$where: the ```python block runs and does its work")
	  or d("exit $?\n$out$err");
	n(sprintf('%s: the Python worker ran %.1f s', $where, now_s() - $t));
	is( $node->safe_psql('app', 'SELECT string_agg(message_id, \', \' ORDER BY message_id) FROM sent'),
		'm-c@x, m-eve@example.com, m-flaky@example.com',
		"$where: the worker sent each email once");
	is( $node->safe_psql('app', q{
SELECT string_agg(format('%s %s %s %s', payload->>'to', status, attempt, result), ', ' ORDER BY id)
  FROM wf.jobs WHERE queue = 'emails' AND payload->>'to' IN ('c@x', 'eve@example.com', 'flaky@example.com')}),
		'c@x done 2 {"message_id": "m-c@x"}, eve@example.com done 1 {"message_id": "m-eve@example.com"}, '
		  . 'flaky@example.com done 2 {"message_id": "m-flaky@example.com"}',
		"$where: and completed their jobs with its results (a failure retried)");
	return;
}
