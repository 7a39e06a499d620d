"""A web server and its workers started at once on an empty PostgreSQL: one migrates, none dies.

`docker compose up` starts `grader serve` and every `grader worker` together; each opens the store and
upgrades its schema if needed. They must take turns (grader.db.engine.migration_lock) and see each
other's committed tables: before, one of them died with "relation alembic_version already exists".
"""

from __future__ import annotations

import subprocess
import sys
import time

from tests.servers import fresh_database

PROCESSES = 6
ROUNDS = 2

OPEN_STORE = """
import sys
from grader.course.store import Store
with Store(sys.argv[1]) as store:
    print(store.version)
"""


def wait_for_waiters(connection, count: int) -> None:
    """Until `count` sessions wait for the migration lock the test holds: all of them queued, so that
    every hand-over of the lock from one to the next is tried."""
    from sqlalchemy import text

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        waiting = connection.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                          "AND NOT granted")).scalar()
        if waiting == count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} processes never all waited for the migration lock")


def test_processes_started_together_on_an_empty_postgres_all_open_one_schema(postgres_url):
    from sqlalchemy import create_engine, text

    from grader.course.store import SCHEMA_VERSION
    from grader.db.engine import MIGRATION_LOCK

    for _ in range(ROUNDS):
        url = fresh_database(postgres_url)
        engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
        with engine.connect() as holder:
            # The test holds the lock while the processes start, as a process migrating would.
            holder.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK})"))
            processes = [subprocess.Popen([sys.executable, "-c", OPEN_STORE, url], text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(PROCESSES)]
            wait_for_waiters(holder, PROCESSES)
            holder.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
        outcomes = [process.communicate(timeout=120) for process in processes]
        for process, (out, err) in zip(processes, outcomes, strict=True):
            assert process.returncode == 0, err[-2000:]
            assert out.strip() == str(SCHEMA_VERSION)
        with engine.connect() as connection:
            versions = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        engine.dispose()
        assert versions == [f"{SCHEMA_VERSION:04d}"]
