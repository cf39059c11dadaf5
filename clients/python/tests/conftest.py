"""Fixtures: a real server (PG_WF_TEST_DSN: a database with CREATE EXTENSION
pg_wf, the server preloading pg_wf), one fresh queue name per test, workers
that are always shut down."""
import logging
import os
import uuid

import psycopg
import pytest

DSN = os.environ.get("PG_WF_TEST_DSN")


def pytest_collection_modifyitems(config, items):
    if not DSN:
        skip = pytest.mark.skip(reason="PG_WF_TEST_DSN is not set")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def dsn():
    return DSN


@pytest.fixture(scope="session", autouse=True)
def schema():
    if not DSN:
        yield
        return
    with psycopg.connect(DSN, autocommit=True) as c:
        c.execute("CREATE SCHEMA IF NOT EXISTS wfpy_test")
        # Side effects of handlers: one row per write, for exactly-once checks.
        c.execute("""CREATE TABLE IF NOT EXISTS wfpy_test.effects (
                         queue text NOT NULL, job_id bigint NOT NULL, attempt int NOT NULL,
                         key text, note text, at timestamptz NOT NULL DEFAULT clock_timestamp())""")
    yield


@pytest.fixture
def conn():
    with psycopg.connect(DSN, autocommit=True) as c:
        yield c


@pytest.fixture
def queue(request):
    return f"py.{request.node.name[:60]}.{uuid.uuid4().hex[:8]}"


@pytest.fixture
def make_worker(dsn):
    """Worker(...) with test-friendly defaults; every one is stopped at the end."""
    import pg_wf
    workers = []

    def make(**kwargs):
        kwargs.setdefault("claim_wait", 2)
        kwargs.setdefault("shutdown_timeout", 5)
        w = pg_wf.Worker(dsn, **kwargs)
        workers.append(w)
        return w

    yield make
    for w in workers:
        if w._supervisor is not None:
            w.stop(force=True)
            assert w.join(15), "a worker did not shut down"


@pytest.fixture(autouse=True)
def _library_logs(caplog):
    caplog.set_level(logging.DEBUG, logger="pg_wf")
    yield
