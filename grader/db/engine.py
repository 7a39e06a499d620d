"""An SQLAlchemy engine for a store given as a path (SQLite) or a URL (sqlite:///..., postgresql://...).

SQLite: WAL mode, foreign keys on, a busy timeout, and write transactions that take the write lock
up front (`BEGIN IMMEDIATE`) so two writers never deadlock half-way. The file is created owner-only
(0600) before SQLite opens it; SQLite gives its -wal and -shm files the same mode.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry

from grader.errors import StoreError
from grader.private_files import PRIVATE_FILE, PRIVATE_FOLDER, create_private_file, make_private_folder, write_private

__all__ = ["PRIVATE_FILE", "PRIVATE_FOLDER", "create_private_file", "make_private_folder", "write_private"]

# The PostgreSQL advisory lock that one process at a time holds while it looks at and upgrades the schema.
MIGRATION_LOCK = 424242


def is_url(location: str | Path) -> bool:
    return "://" in str(location)


def sqlite_path(location: str | Path) -> Path | None:
    """The file of an SQLite store, None for another database."""
    if not is_url(location):
        return Path(location)
    try:
        url = make_url(str(location))
    except ArgumentError:
        raise StoreError(f"{location}: not a database URL (sqlite:///PATH or postgresql://USER@HOST/NAME)") from None
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None


def make_engine(location: str | Path) -> Engine:
    path = sqlite_path(location)
    if path is None:
        url = make_url(str(location))
        # psycopg 3 is the driver this project installs; postgres:// is the spelling Heroku, Render and
        # libpq's own tools use for the same URL.
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
    create_private_file(path)
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # let the "begin" hook below say how a transaction starts
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA busy_timeout = 30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get("write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@contextlib.contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Hold the store's migration lock (PostgreSQL; SQLite's write lock serialises it already) while the
    schema is read and upgraded, so that a web server and its workers started together on an empty
    database migrate it once, one after the other.

    The lock is PostgreSQL's session-level advisory lock: it is released the moment `pg_advisory_unlock`
    runs, not at commit. So the upgrade's last transaction is ended (committed, or rolled back on an error)
    before the lock is given up; otherwise the next process reads the schema before the tables the first
    one made are committed, and its own CREATE TABLE fails ("relation alembic_version already exists").
    """
    if connection.dialect.name != "postgresql":
        yield
        return
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
    connection.commit()
    try:
        yield
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
        connection.commit()
