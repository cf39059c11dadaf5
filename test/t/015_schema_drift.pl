# A fresh CREATE EXTENSION pg_wf runs one install script, built from
# sql/pg_wf.sql; a database created at an older version and then updated
# runs pg_wf--1.0.sql and every upgrade script since. Both must end with the
# same schema, object by object: tables (kind, persistence, options),
# columns (by name: an added column comes last in an updated table),
# constraints, indexes, views, sequences, functions (arguments and their
# defaults, result, language, volatility, strictness, security, settings,
# parallel safety, C symbol), types, triggers, policies, rules, the ACL of
# every object, comments, the extension's members and dumped tables, the
# dependencies between them, and the rows the scripts leave (the sentinel
# claim). A difference fails with a diff that names the object.
#
# The comparison is checked not to be vacuous: it sees hundreds of objects,
# and it reports each of a list of deliberate changes (made in a transaction
# that is rolled back, and one committed and then reverted).
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('schema_drift', no_extension => 1);

my $current = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'pg_wf'");
is( $node->safe_psql('postgres',
		"SELECT string_agg(version, ' ' ORDER BY string_to_array(version, '.')::int[])"
		  . " FROM pg_available_extension_versions WHERE name = 'pg_wf'"),
	'1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12', 'versions 1.0 to 1.12 are installable');
is( $node->safe_psql('postgres',
		"SELECT path FROM pg_extension_update_paths('pg_wf') WHERE source = '1.0' AND target = '$current'"),
	'1.0--1.1--1.2--1.3--1.4--1.5--1.6--1.7--1.8--1.9--1.10--1.11--1.12', 'the update path from 1.0');

# One database created fresh, one created at each older version and updated.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION pg_wf');
my @old = ('1.0', '1.1', '1.2', '1.3', '1.4', '1.5', '1.6', '1.7', '1.8', '1.9', '1.10', '1.11');
for my $v (@old)
{
	(my $db = "from_$v") =~ s/\./_/;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION pg_wf VERSION '$v'");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
		$v, "$db: created at $v");
	$node->safe_psql($db, 'ALTER EXTENSION pg_wf UPDATE');
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
		$current, "$db: updated to $current");
}
# The two paths did run different scripts: the updated wf.job keeps the
# column 1.3 dropped (as a dropped attribute), the fresh one never had it.
my $dropped = q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'wf.job'::regclass AND attisdropped};
is($node->safe_psql('fresh', $dropped), '0', 'fresh: wf.job was created by the one install script');
is($node->safe_psql('from_1_0', $dropped), '1', 'from_1_0: wf.job went through the upgrade scripts');

# Everything pg_wf's scripts create, as [key, description] pairs: the key
# names the object without its OID or column number, the description is
# what must be equal.
my $snapshot_sql = q{
SET search_path = pg_catalog, pg_temp;
WITH
ext AS (SELECT * FROM pg_extension WHERE extname = 'pg_wf'),
members AS (
  SELECT d.classid, d.objid, d.objsubid FROM pg_depend d, ext
   WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
rels AS (
  SELECT c.* FROM pg_class c
   WHERE c.relnamespace = 'wf'::regnamespace
      OR c.oid IN (SELECT objid FROM members WHERE classid = 'pg_class'::regclass)),
procs AS (
  SELECT p.* FROM pg_proc p
   WHERE p.pronamespace = 'wf'::regnamespace
      OR p.oid IN (SELECT objid FROM members WHERE classid = 'pg_proc'::regclass)),
types AS (
  SELECT t.* FROM pg_type t
   WHERE t.typnamespace = 'wf'::regnamespace
      OR t.oid IN (SELECT objid FROM members WHERE classid = 'pg_type'::regclass)),
cons AS (
  SELECT k.* FROM pg_constraint k
   WHERE k.conrelid IN (SELECT oid FROM rels) OR k.contypid IN (SELECT oid FROM types)
      OR k.connamespace = 'wf'::regnamespace),
trigs AS (SELECT g.* FROM pg_trigger g WHERE g.tgrelid IN (SELECT oid FROM rels) AND NOT g.tgisinternal),
pols AS (SELECT y.* FROM pg_policy y WHERE y.polrelid IN (SELECT oid FROM rels)),
rules AS (SELECT r.* FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rels)),
ours (classid, objid, objsubid) AS (
  SELECT classid, objid, objsubid FROM members
  UNION SELECT 'pg_namespace'::regclass, 'wf'::regnamespace, 0
  UNION SELECT 'pg_class'::regclass, oid, 0 FROM rels
  UNION SELECT 'pg_class'::regclass, a.attrelid, a.attnum
          FROM pg_attribute a JOIN rels ON a.attrelid = rels.oid
         WHERE a.attnum > 0 AND NOT a.attisdropped
  UNION SELECT 'pg_attrdef'::regclass, ad.oid, 0 FROM pg_attrdef ad JOIN rels ON ad.adrelid = rels.oid
  UNION SELECT 'pg_proc'::regclass, oid, 0 FROM procs
  UNION SELECT 'pg_type'::regclass, oid, 0 FROM types
  UNION SELECT 'pg_constraint'::regclass, oid, 0 FROM cons
  UNION SELECT 'pg_trigger'::regclass, oid, 0 FROM trigs
  UNION SELECT 'pg_policy'::regclass, oid, 0 FROM pols
  UNION SELECT 'pg_rewrite'::regclass, oid, 0 FROM rules),
items (k, v) AS (
  SELECT 'extension pg_wf', jsonb_build_object(
           'version', e.extversion, 'relocatable', e.extrelocatable,
           'schema', e.extnamespace::regnamespace::text, 'owner', e.extowner::regrole::text,
           'dumped', (SELECT jsonb_object_agg(u.c::regclass::text, u.cond)
                        FROM unnest(e.extconfig, e.extcondition) AS u(c, cond)))
    FROM ext e
  UNION ALL
  SELECT 'schema ' || n.nspname, jsonb_build_object('owner', n.nspowner::regrole::text, 'acl', n.nspacl::text[])
    FROM pg_namespace n WHERE n.nspname = 'wf'
  UNION ALL
  -- tables, views, sequences, indexes: "table wf.job", "index wf.job_pkey"
  SELECT o.type || ' ' || o.identity, jsonb_build_object(
           'kind', c.relkind, 'persistence', c.relpersistence,
           'options', (SELECT jsonb_agg(x ORDER BY x) FROM unnest(c.reloptions) x),
           'access method', am.amname, 'tablespace', nullif(c.reltablespace, 0),
           'owner', c.relowner::regrole::text, 'acl', c.relacl::text[],
           'row security', c.relrowsecurity, 'forced row security', c.relforcerowsecurity,
           'replica identity', c.relreplident, 'has toast', c.reltoastrelid <> 0,
           'of type', nullif(c.reloftype, 0)::regtype::text,
           'partition', c.relispartition, 'partition bound', pg_get_expr(c.relpartbound, c.oid),
           'partition key', CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
           'index', (SELECT jsonb_build_object('def', pg_get_indexdef(i.indexrelid),
                              'primary', i.indisprimary, 'unique', i.indisunique,
                              'exclusion', i.indisexclusion, 'immediate', i.indimmediate,
                              'clustered', i.indisclustered, 'replica identity', i.indisreplident,
                              'valid', i.indisvalid, 'ready', i.indisready, 'live', i.indislive)
                       FROM pg_index i WHERE i.indexrelid = c.oid),
           'view', CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END,
           'sequence', (SELECT jsonb_build_object('type', s.seqtypid::regtype::text,
                                 'start', s.seqstart, 'increment', s.seqincrement,
                                 'min', s.seqmin, 'max', s.seqmax, 'cache', s.seqcache,
                                 'cycle', s.seqcycle)
                          FROM pg_sequence s WHERE s.seqrelid = c.oid),
           'owned by', (SELECT string_agg((pg_identify_object(d.refclassid, d.refobjid, d.refobjsubid)).identity, ', ')
                          FROM pg_depend d
                         WHERE c.relkind = 'S' AND d.classid = 'pg_class'::regclass
                           AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
    FROM rels c LEFT JOIN pg_am am ON am.oid = c.relam,
         LATERAL pg_identify_object('pg_class'::regclass, c.oid, 0) o
  UNION ALL
  -- columns, keyed by name: "column wf.job.priority"
  SELECT 'column ' || o.identity, jsonb_build_object(
           'type', format_type(a.atttypid, a.atttypmod), 'typmod', a.atttypmod,
           'dimensions', a.attndims, 'not null', a.attnotnull,
           'default', pg_get_expr(ad.adbin, ad.adrelid),
           'identity', nullif(a.attidentity, ''), 'generated', nullif(a.attgenerated, ''),
           'collation', nullif(a.attcollation, 0)::regcollation::text,
           'storage', a.attstorage, 'compression', nullif(a.attcompression, ''),
           'statistics', a.attstattarget, 'options', a.attoptions, 'fdw options', a.attfdwoptions,
           'local', a.attislocal, 'inherited', a.attinhcount, 'acl', a.attacl::text[])
    FROM rels c
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum,
         LATERAL pg_identify_object('pg_class'::regclass, c.oid, a.attnum) o
   WHERE c.relkind NOT IN ('i', 'I')
  UNION ALL
  -- "constraint job_pkey on wf.job"
  SELECT 'constraint ' || o.identity, jsonb_build_object(
           'type', k.contype, 'def', pg_get_constraintdef(k.oid),
           'deferrable', k.condeferrable, 'deferred', k.condeferred,
           'validated', k.convalidated, 'local', k.conislocal, 'no inherit', k.connoinherit,
           'index', nullif(k.conindid, 0)::regclass::text)
    FROM cons k, LATERAL pg_identify_object('pg_constraint'::regclass, k.oid, 0) o
  UNION ALL
  -- "function public.wf_claim(text,text,integer,interval,interval)"
  SELECT 'function ' || p.oid::regprocedure::text, jsonb_build_object(
           'arguments', pg_get_function_arguments(p.oid), 'result', pg_get_function_result(p.oid),
           'kind', p.prokind, 'language', l.lanname, 'volatility', p.provolatile,
           'strict', p.proisstrict, 'security definer', p.prosecdef,
           'leakproof', p.proleakproof, 'parallel', p.proparallel,
           'cost', p.procost, 'rows', p.prorows, 'returns set', p.proretset,
           'variadic', nullif(p.provariadic, 0)::regtype::text, 'support', p.prosupport::text,
           'config', p.proconfig, 'source', p.prosrc, 'library', p.probin,
           'sql body', pg_get_function_sqlbody(p.oid),
           'owner', p.proowner::regrole::text, 'acl', p.proacl::text[])
    FROM procs p JOIN pg_language l ON l.oid = p.prolang
  UNION ALL
  -- "type wf.job", "type wf.job[]"
  SELECT 'type ' || t.oid::regtype::text, jsonb_build_object(
           'kind', t.typtype, 'category', t.typcategory,
           'relation', nullif(t.typrelid, 0)::regclass::text,
           'element', nullif(t.typelem, 0)::regtype::text,
           'array', nullif(t.typarray, 0)::regtype::text,
           'base', nullif(t.typbasetype, 0)::regtype::text,
           'not null', t.typnotnull, 'default', t.typdefault,
           'collation', nullif(t.typcollation, 0)::regcollation::text,
           'labels', (SELECT jsonb_agg(en.enumlabel ORDER BY en.enumsortorder)
                        FROM pg_enum en WHERE en.enumtypid = t.oid),
           'owner', t.typowner::regrole::text, 'acl', t.typacl::text[])
    FROM types t
  UNION ALL
  SELECT 'trigger ' || o.identity,
         jsonb_build_object('def', pg_get_triggerdef(g.oid), 'enabled', g.tgenabled)
    FROM trigs g, LATERAL pg_identify_object('pg_trigger'::regclass, g.oid, 0) o
  UNION ALL
  -- "event trigger wf_guard": what pg_wf's event triggers fire on, and run
  SELECT 'event trigger ' || t.evtname, jsonb_build_object(
           'event', t.evtevent, 'tags', t.evttags, 'function', t.evtfoid::regprocedure::text,
           'enabled', t.evtenabled, 'owner', t.evtowner::regrole::text)
    FROM pg_event_trigger t
   WHERE t.oid IN (SELECT objid FROM members WHERE classid = 'pg_event_trigger'::regclass)
  UNION ALL
  SELECT 'policy ' || o.identity, jsonb_build_object(
           'command', y.polcmd, 'permissive', y.polpermissive,
           'roles', y.polroles::regrole[]::text,
           'using', pg_get_expr(y.polqual, y.polrelid),
           'with check', pg_get_expr(y.polwithcheck, y.polrelid))
    FROM pols y, LATERAL pg_identify_object('pg_policy'::regclass, y.oid, 0) o
  UNION ALL
  -- a view's own rule is its viewdef, above
  SELECT 'rule ' || o.identity, jsonb_build_object('def', pg_get_ruledef(r.oid), 'enabled', r.ev_enabled)
    FROM rules r, LATERAL pg_identify_object('pg_rewrite'::regclass, r.oid, 0) o
   WHERE r.rulename <> '_RETURN'
  UNION ALL
  SELECT 'comment on ' || o.type || ' ' || o.identity, to_jsonb(d.description)
    FROM pg_description d
    JOIN ours u ON d.classoid = u.classid AND d.objoid = u.objid AND d.objsubid = u.objsubid,
         LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
  UNION ALL
  SELECT 'member ' || o.type || ' ' || o.identity, to_jsonb(true)
    FROM members m, LATERAL pg_identify_object(m.classid, m.objid, m.objsubid) o
  UNION ALL
  -- the privileges pg_dump takes as the extension's own
  SELECT 'initial privileges of ' || o.type || ' ' || o.identity,
         jsonb_build_object('type', ip.privtype, 'acl', ip.initprivs::text[])
    FROM pg_init_privs ip
    JOIN ours u ON ip.classoid = u.classid AND ip.objoid = u.objid AND ip.objsubid = u.objsubid,
         LATERAL pg_identify_object(ip.classoid, ip.objoid, ip.objsubid) o
  UNION ALL
  SELECT 'dependency of ' || o.type || ' ' || o.identity || ' on ' || r.type || ' ' || r.identity
           || ' (' || d.deptype::text || ')', to_jsonb(count(*))
    FROM pg_depend d,
         LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) o,
         LATERAL pg_identify_object(d.refclassid, d.refobjid, d.refobjsubid) r
   WHERE d.deptype <> 'e' AND (d.classid, d.objid) IN (SELECT classid, objid FROM ours)
   GROUP BY 1
  UNION ALL
  -- rows the scripts leave (the sentinel claim), as sorted jsonb
  SELECT 'rows of ' || o.type || ' ' || o.identity,
         to_jsonb(coalesce((xpath('/row/x/text()', query_to_xml(format(
             'SELECT string_agg(to_jsonb(t)::text, E''\n'' ORDER BY to_jsonb(t)::text) AS x FROM %s t',
             c.oid::regclass), false, true, '')))[1]::text, ''))
    FROM rels c, LATERAL pg_identify_object('pg_class'::regclass, c.oid, 0) o
   WHERE c.relkind IN ('r', 'p'))
SELECT jsonb_agg(jsonb_build_array(k, jsonb_strip_nulls(v)) ORDER BY k) FROM items;
};

my $json = JSON::PP->new->canonical->allow_nonref;

# The schema of one database (or of one session's transaction: pass the SQL
# to run before, and after, the snapshot).
sub snapshot
{
	my ($db, $before, $after) = @_;
	my $out = $node->safe_psql($db,
		($before // '') . "\n$snapshot_sql\n" . ($after // ''));
	my %objects;
	for my $pair (@{ decode_json($out) })
	{
		my ($k, $v) = @$pair;
		die "$db: two objects named \"$k\"" if exists $objects{$k};
		$objects{$k} = $v;
	}
	return \%objects;
}

sub show
{
	my ($v) = @_;
	return '(absent)' unless defined $v;
	# multi-line text (a view's definition) as it is, indented
	return "\n        " . join("\n        ", split /\n/, $v)
	  if !ref $v && $v =~ /\n/;
	return $json->encode($v);
}

# Two multi-line texts (view definitions) as the lines that differ, with
# one line of context: "-" for the first, "+" for the second.
sub line_diff
{
	my ($x, $y) = @_;
	my @a = split /\n/, $x;
	my @b = split /\n/, $y;
	my @lcs;    # $lcs[$i][$j]: longest common subsequence of @a[$i..], @b[$j..]
	for (my $i = $#a + 1; $i >= 0; $i--)
	{
		for (my $j = $#b + 1; $j >= 0; $j--)
		{
			$lcs[$i][$j] =
				$i > $#a || $j > $#b ? 0
			  : $a[$i] eq $b[$j] ? $lcs[ $i + 1 ][ $j + 1 ] + 1
			  : $lcs[ $i + 1 ][$j] > $lcs[$i][ $j + 1 ] ? $lcs[ $i + 1 ][$j]
			  :                                            $lcs[$i][ $j + 1 ];
		}
	}
	my @out;
	my ($i, $j) = (0, 0);
	while ($i <= $#a || $j <= $#b)
	{
		if ($i <= $#a && $j <= $#b && $a[$i] eq $b[$j])
		{
			push @out, [ ' ', $a[$i] ]; $i++; $j++;
		}
		elsif ($i <= $#a && ($j > $#b || $lcs[ $i + 1 ][$j] >= $lcs[$i][ $j + 1 ]))
		{
			push @out, [ '-', $a[$i] ]; $i++;
		}
		else
		{
			push @out, [ '+', $b[$j] ]; $j++;
		}
	}
	my @near = grep {
		my $n = $_;
		grep { $_ >= 0 && $_ <= $#out && $out[$_][0] ne ' ' } $n - 1 .. $n + 1
	} 0 .. $#out;
	return join("\n", map { "      $out[$_][0] $out[$_][1]" } @near);
}

# The objects that differ, and a diff that names each and what differs.
sub schema_diff
{
	my ($a, $an, $b, $bn) = @_;
	my (@keys, @lines);
	my %all = (%$a, %$b);
	for my $k (sort keys %all)
	{
		if (!exists $b->{$k} || !exists $a->{$k})
		{
			my ($in, $v) = exists $a->{$k} ? ($an, $a->{$k}) : ($bn, $b->{$k});
			push @keys, $k;
			push @lines, "only in $in: $k " . show($v);
			next;
		}
		my ($x, $y) = ($a->{$k}, $b->{$k});
		next if $json->encode($x) eq $json->encode($y);
		push @keys, $k;
		if (ref $x eq 'HASH' && ref $y eq 'HASH')
		{
			my %fields = (%$x, %$y);
			for my $f (sort keys %fields)
			{
				my ($fx, $fy) = ($json->encode($x->{$f}), $json->encode($y->{$f}));
				next if $fx eq $fy;
				if (   defined $x->{$f} && defined $y->{$f} && !ref $x->{$f} && !ref $y->{$f}
					&& "$x->{$f}$y->{$f}" =~ /\n/)
				{
					push @lines, "$k: $f differs (- $an, + $bn)", line_diff($x->{$f}, $y->{$f});
					next;
				}
				push @lines, "$k: $f differs",
				  "    $an: " . show($x->{$f}), "    $bn: " . show($y->{$f});
			}
		}
		else
		{
			push @lines, "$k differs", "    $an: " . show($x), "    $bn: " . show($y);
		}
	}
	return (\@keys, join("\n", @lines));
}

my $fresh = snapshot('fresh');

# Not vacuous: it sees every kind of object pg_wf has, and many of them.
my %count;
$count{ (split / /, $_)[0] }++ for keys %$fresh;
note(join(', ', map { "$count{$_} $_" } sort keys %count));
my %least = (table => 12, view => 6, sequence => 1, index => 17, column => 140,
	constraint => 14, function => 23, type => 30, member => 40,
	dependency => 200, extension => 1, schema => 1, rows => 11);
for my $kind (sort keys %least)
{
	cmp_ok($count{$kind} // 0, '>=', $least{$kind}, "fresh: compares at least $least{$kind} objects of kind $kind");
}
cmp_ok(scalar(keys %$fresh), '>', 500, 'fresh: over 500 objects compared in all');
like($fresh->{'rows of table wf.claim'}, qr/"owner_session": 0/, 'fresh: the sentinel claim is seen');
is_deeply([ sort keys %{ $fresh->{'extension pg_wf'}{dumped} } ],
	[ sort('wf."grant"', map { "wf.$_" } qw(job job_id_seq ready dependency queue_config
		  release_debt workflow checkpoint event event_wait schedule dedup ordered_group
		  workflow_key child remote_dependent remote_input outbox outbox_id_seq)) ],
	'fresh: the dumped tables are seen');
ok(!grep({ /^column wf\.job\.owner_pid$/ } keys %$fresh), 'fresh: wf.job has no owner_pid');
ok(exists $fresh->{'column wf.claim.owner_pid'}, 'fresh: wf.claim has owner_pid');

# ---- each update path ends where a fresh install starts ----
for my $v (@old)
{
	(my $db = "from_$v") =~ s/\./_/;
	my ($keys, $diff) = schema_diff($fresh, 'fresh', snapshot($db), $db);
	is($diff, '', "$db: updated from $v, the schema equals a fresh $current install");
}

# ---- and the comparison does see a difference ----
# One change committed, then reverted.
$node->safe_psql('from_1_0', 'ALTER TABLE wf.job ALTER COLUMN priority SET DEFAULT 1');
my ($keys, $diff) = schema_diff($fresh, 'fresh', snapshot('from_1_0'), 'from_1_0');
is_deeply($keys, ['column wf.job.priority'], 'a changed default is the one difference')
  or diag($diff);
like($diff, qr/^column wf\.job\.priority: default differs\n    fresh: "0"\n    from_1_0: "1"$/,
	'the diff names the object, the field and both values');
$node->safe_psql('from_1_0', 'ALTER TABLE wf.job ALTER COLUMN priority SET DEFAULT 0');
($keys, $diff) = schema_diff($fresh, 'fresh', snapshot('from_1_0'), 'from_1_0');
is($diff, '', 'reverted, no difference');

# Each of these, made in a transaction that is rolled back, is reported
# under the object it changes.
my $unguard = 'ALTER EVENT TRIGGER wf_guard DISABLE;';
my @changes = (
	[ 'a column added', 'ALTER TABLE wf.job ADD COLUMN owner_pid int',
		qr/^column wf\.job\.owner_pid$/ ],
	[ 'a NOT NULL', 'ALTER TABLE wf.job ALTER COLUMN worker SET NOT NULL',
		qr/^column wf\.job\.worker$/ ],
	[ 'a column type', 'ALTER TABLE wf.release_debt ALTER COLUMN child_id TYPE int',
		qr/^column wf\.release_debt\.child_id$/ ],
	[ 'a column collation', 'ALTER TABLE wf.event ALTER COLUMN name TYPE text COLLATE "C"',
		qr/^column wf\.event\.name$/ ],
	[ 'an identity', 'ALTER TABLE wf.dependency ALTER COLUMN parent_id ADD GENERATED ALWAYS AS IDENTITY',
		qr/^column wf\.dependency\.parent_id$/ ],
	[ 'a table option', 'ALTER TABLE wf.ready SET (autovacuum_vacuum_threshold = 1)',
		qr/^table wf\.ready$/ ],
	[ 'persistence', 'ALTER TABLE wf.claim SET LOGGED', qr/^table wf\.claim$/ ],
	# (Attachments are refused by pg_wf's event trigger wf_guard: a
	# superuser who disables it can still make them, and this test must
	# see them.)
	[ 'row security', "$unguard ALTER TABLE wf.event ENABLE ROW LEVEL SECURITY", qr/^table wf\.event$/ ],
	[ 'a check constraint', 'ALTER TABLE wf.queue_config DROP CONSTRAINT queue_config_lease_check',
		qr/^constraint queue_config_lease_check on wf\.queue_config$/ ],
	[ 'an index', 'DROP INDEX wf.job_workflow', qr/^index wf\.job_workflow$/ ],
	[ 'an index predicate', 'DROP INDEX wf.event_wait_timeout; CREATE INDEX event_wait_timeout ON wf.event_wait (timeout_at)',
		qr/^index wf\.event_wait_timeout$/ ],
	[ 'a view', 'CREATE OR REPLACE VIEW wf.schedules AS SELECT name, cron, queue, payload,'
		  . ' next_run_at AS next_run, last_run_at AS last_run, last_job_id, created_at, updated_at, enabled'
		  . ' FROM wf.schedule WHERE next_run_at IS NOT NULL',
		qr/^view wf\.schedules$/ ],
	[ 'a sequence', 'ALTER SEQUENCE wf.job_id_seq CACHE 10', qr/^sequence wf\.job_id_seq$/ ],
	[ 'an event trigger', $unguard, qr/^event trigger wf_guard$/ ],
	[ 'a function setting', 'ALTER FUNCTION wf_sweep() SET jit = on', qr/^function \S+\.wf_sweep\(\)$/ ],
	[ 'a function volatility', 'ALTER FUNCTION wf_retry(text, bigint) STABLE',
		qr/^function \S+\.wf_retry\(text,bigint\)$/ ],
	[ 'a function security', 'ALTER FUNCTION wf_cancel(text, bigint) SECURITY DEFINER',
		qr/^function \S+\.wf_cancel\(text,bigint\)$/ ],
	[ 'an argument default', q{CREATE OR REPLACE FUNCTION wf_schedule(name text, cron text, queue text, payload jsonb DEFAULT '[]')}
		  . q{ RETURNS timestamptz AS '$libdir/pg_wf', 'wf_schedule' LANGUAGE C VOLATILE SET jit = off},
		qr/^function \S+\.wf_schedule\(text,text,text,jsonb\)$/ ],
	[ 'a C symbol', q{CREATE OR REPLACE FUNCTION wf_unschedule(name text) RETURNS boolean}
		  . q{ AS '$libdir/pg_wf', 'wf_schedule' LANGUAGE C VOLATILE SET jit = off},
		qr/^function \S+\.wf_unschedule\(text\)$/ ],
	[ 'a table grant', 'GRANT SELECT ON wf.job TO PUBLIC', qr/^table wf\.job$/ ],
	[ 'a column grant', 'GRANT SELECT (payload) ON wf.job TO PUBLIC', qr/^column wf\.job\.payload$/ ],
	[ 'a function grant', 'GRANT EXECUTE ON FUNCTION wf_sweep() TO PUBLIC',
		qr/^function \S+\.wf_sweep\(\)$/ ],
	[ 'a schema grant', 'REVOKE USAGE ON SCHEMA wf FROM PUBLIC', qr/^schema wf$/ ],
	[ 'a comment', q{COMMENT ON VIEW wf.jobs IS 'one row per job'}, qr/^comment on view wf\.jobs$/ ],
	[ 'a column comment', q{COMMENT ON COLUMN wf.job.events IS 'events'},
		qr/^comment on table column wf\.job\.events$/ ],
	[ 'a trigger', $unguard . q{ CREATE FUNCTION public.wf_drift_t() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';}
		  . q{ CREATE TRIGGER drift BEFORE INSERT ON wf.event FOR EACH ROW EXECUTE FUNCTION public.wf_drift_t()},
		qr/^trigger drift on wf\.event$/ ],
	[ 'a policy', "$unguard CREATE POLICY drift ON wf.event USING (true)", qr/^policy drift on wf\.event$/ ],
	[ 'a rule', "$unguard CREATE RULE drift AS ON INSERT TO wf.event DO ALSO NOTIFY wf_drift",
		qr/^rule drift on wf\.event$/ ],
	[ 'a type', q{CREATE TYPE wf.drift AS ENUM ('a')}, qr/^type wf\.drift$/ ],
	[ 'an extra table', 'CREATE TABLE wf.drift (x int)', qr/^table wf\.drift$/ ],
	[ 'extension membership', 'ALTER EXTENSION pg_wf DROP VIEW wf.schedules',
		qr/^member view wf\.schedules$/ ],
	[ 'a dump condition', q{UPDATE pg_extension SET extcondition[1] = 'WHERE false' WHERE extname = 'pg_wf'},
		qr/^extension pg_wf$/ ],
	[ 'the sentinel row', q{DELETE FROM wf.claim WHERE queue = ''}, qr/^rows of table wf\.claim$/ ],
);
for my $c (@changes)
{
	my ($what, $sql, $want) = @$c;
	my ($k, $d) = schema_diff($fresh, 'fresh',
		snapshot('from_1_0', "BEGIN;\n$sql;", 'ROLLBACK;'), 'from_1_0');
	ok(scalar(grep { $_ =~ $want } @$k), "the comparison reports $what")
	  or diag("differing: @$k\n$d");
}
($keys, $diff) = schema_diff($fresh, 'fresh', snapshot('from_1_0'), 'from_1_0');
is($diff, '', 'every change rolled back, no difference');

$node->stop;
done_testing();
