# pg_wf, built with PGXS. `make install` then `make installcheck` (run as a
# non-root user) runs pg_regress, the isolation specs and the TAP crash tests;
# scripts/test.sh does all of it, unit tests included.
EXTENSION  = pg_wf
MODULE_big = pg_wf
# sql/pg_wf.sql is the current schema in one file; the build copies it to
# the install script of default_version (pg_wf.control), which CREATE
# EXTENSION runs. The 1.0 install script and the upgrade scripts stay as
# they are: ALTER EXTENSION ... UPDATE and CREATE EXTENSION ... VERSION of an
# older version go through them (test/t/015_schema_drift.pl checks both ends
# are the same schema).
EXTVERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)
DATA       = sql/pg_wf--1.0.sql $(wildcard sql/pg_wf--*--*.sql)
DATA_built = sql/pg_wf--$(EXTVERSION).sql
ifeq ($(EXTVERSION),)
$(error no default_version in $(EXTENSION).control)
endif
PGFILEDESC = "pg_wf - durable job queue and workflow engine"

CORE_OBJS = src/core/retry_policy.o src/core/validation.o src/core/workflow_spec.o src/core/cron.o \
            src/core/rate_window.o src/core/shard_names.o
# src/pg, by layer, each using only those above it: base/ the C++/PostgreSQL
# boundary and SPI; runtime/ the library in the server (shared memory,
# wake-ups, session ownership, the extension's version); citus/ pg_wf
# distributed by Citus (found in the catalogs, no Citus header); jobs/ the job state
# machine and the dependency engine; api/ the SQL functions; worker/ the
# background workers (launcher, reaper, retention); module.cpp loads it all.
BASE_OBJS    = src/pg/base/guard.o src/pg/base/spi.o src/pg/base/args.o src/pg/base/invalidation.o \
               src/pg/base/statement_settings.o
RUNTIME_OBJS = src/pg/runtime/extension.o src/pg/runtime/attachments.o src/pg/runtime/run_as.o \
               src/pg/runtime/shared_memory.o \
               src/pg/runtime/worker_registry.o src/pg/runtime/wakeup.o src/pg/runtime/ownership.o \
               src/pg/runtime/rate_windows.o src/pg/runtime/metrics.o
CITUS_OBJS   = src/pg/citus/shard_route.o src/pg/citus/ownership.o src/pg/citus/distribute.o \
               src/pg/citus/cluster_calls.o
JOBS_OBJS    = src/pg/jobs/job_state.o src/pg/jobs/dependencies.o src/pg/jobs/ready_set.o \
               src/pg/jobs/direct_table.o src/pg/jobs/index_entries.o src/pg/jobs/claim_table.o src/pg/jobs/job_table.o \
               src/pg/jobs/job_rows.o src/pg/jobs/claim_rows.o src/pg/jobs/job_inserts.o \
               src/pg/jobs/release_rows.o src/pg/jobs/key_order.o \
               src/pg/jobs/flow_control.o src/pg/jobs/children.o src/pg/jobs/remote_dependencies.o
API_OBJS     = src/pg/api/enqueue.o src/pg/api/claim.o src/pg/api/finish.o src/pg/api/operate.o \
               src/pg/api/steps.o src/pg/api/workflow.o src/pg/api/schedule.o \
               src/pg/api/queue_settings.o src/pg/api/rights.o src/pg/api/results.o \
               src/pg/api/waiting.o src/pg/api/metrics.o
WORKER_OBJS  = src/pg/worker/worker.o src/pg/worker/reaper.o src/pg/worker/retention.o src/pg/worker/relay.o
PG_OBJS   = $(BASE_OBJS) $(RUNTIME_OBJS) $(CITUS_OBJS) $(JOBS_OBJS) $(API_OBJS) $(WORKER_OBJS) src/pg/module.o
OBJS = $(CORE_OBJS) $(PG_OBJS)

PG_CPPFLAGS = -I$(srcdir)/src
PG_CXXFLAGS = -std=c++17 -Wno-register -fno-omit-frame-pointer
SHLIB_LINK  += -lstdc++

TESTS_CONF   = --temp-config=$(srcdir)/test/pg_wf.conf
REGRESS      = $(patsubst test/sql/%.sql,%,$(sort $(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test --outputdir=test --temp-instance=./tmp_check $(TESTS_CONF)
ISOLATION      = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso --temp-instance=./tmp_check_iso $(TESTS_CONF)
TAP_TESTS   = 1
PROVE_TESTS = test/t/*.pl

# No LLVM bitcode: JIT would inline pg_wf's functions from it into a
# caller's query (a count over wf.jobs calls wf._visible per row), and
# LLVM 14's summary-based inlining aborts the backend on this C++'s
# bitcode. Until 1.12 every function's SET clause kept JIT from inlining
# it; without bitcode, JIT calls the functions. Bitcode an older build
# installed is removed at install, so that no stale body is inlined.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

install: remove-bitcode
remove-bitcode:
	rm -rf '$(DESTDIR)$(pkglibdir)/bitcode/$(MODULE_big)' '$(DESTDIR)$(pkglibdir)/bitcode/$(MODULE_big).index.bc'
.PHONY: remove-bitcode

# PGXS tracks no header dependencies: every object is rebuilt when any
# header changes (a stale object links against a changed declaration).
HEADERS = $(wildcard src/core/*.hpp src/pg/*/*.hpp)
$(OBJS): $(HEADERS)

$(DATA_built): sql/pg_wf.sql
	cp $< $@

# Unit tests of the pure core: no server, no PostgreSQL header.
UNIT_SRCS = $(wildcard test/unit/*.cpp)
test/unit/run_unit_tests: $(UNIT_SRCS) $(CORE_OBJS:.o=.cpp) $(wildcard src/core/*.hpp)
	$(CXX) -std=c++17 -O1 -g -Isrc -o $@ $(UNIT_SRCS) $(CORE_OBJS:.o=.cpp) -lgtest -lgtest_main -pthread

unit: test/unit/run_unit_tests
	test/unit/run_unit_tests

.PHONY: unit

# The three server suites one by one, so that one failing does not hide the
# others (installcheck stops at the first).
regresscheck:
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
isolationcheck:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
tapcheck:
	$(prove_installcheck)

.PHONY: regresscheck isolationcheck tapcheck

# The benchmark against a plain SKIP LOCKED table (scripts/bench.sh):
# `make bench`, or `make bench BENCH_QUICK=1` for a two-minute smoke run.
bench:
	scripts/bench.sh

# pg_wf next to graphile-worker and pg-boss, installed from npm into the
# ignored bench/peers/node_modules (scripts/bench-peers.sh): drain rate and
# wake latency on the same cluster. `make bench-peers BENCH_QUICK=1`: 2 minutes.
bench-peers:
	scripts/bench-peers.sh

.PHONY: bench bench-peers
