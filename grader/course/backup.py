"""One archive of everything a course needs, and its restore on a fresh server.

The archive (a gzipped tar, written readable by its owner only) holds:
- the store: SQLite's online backup of the file (a consistent copy while the server runs), or PostgreSQL's
  `pg_dump --format=custom` of the database; with it every submission, scorecard, adjustment, extension,
  LTI platform and deployment, the scores still to be sent to an LMS, and two secrets kept in the store's
  settings: `session_key` (signs nothing by itself, but makes the sessions' and links' tokens) and
  `lti_private_key` (the tool's RSA key that the LMSs trust). Whoever holds the archive holds both.
- the spool: submissions that arrived while the database was away and are not stored yet;
- the stored reports of `grader submit` (the `reports/` folder beside the store);
- manifest.json: the grader version and schema revision that wrote it, and the SHA-256 of every member,
  checked before anything is restored.

A restore refuses a store that already holds a course (students, submissions or LTI platforms) unless told
to replace it, and then replaces it whole; the store is then upgraded to this grader's schema as any store
is when it is opened, so an archive of an older release restores into a newer one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sqlalchemy import Engine, MetaData, func, select
from sqlalchemy.engine import URL, make_url

from grader import __version__
from grader.core.scorecard import utc_now
from grader.course.store import Store
from grader.db.engine import PRIVATE_FILE, create_private_file, make_engine, make_private_folder, sqlite_path
from grader.errors import StoreError

FORMAT = 1
MANIFEST = "manifest.json"
SQLITE_MEMBER = "store/grader.sqlite"
POSTGRES_MEMBER = "store/grader.pgdump"
SPOOL = "spool"
REPORTS = "reports"
#: The store's settings that are secrets: named in the manifest so that whoever reads it knows.
SECRETS = ("session_key", "lti_private_key")
#: The tables whose rows make a course: a store with any of them is not replaced without being told.
COURSE_TABLES = ("students", "submissions", "lti_platforms")
PG_TIMEOUT_S = 3600


class BackupError(StoreError):
    """An archive that cannot be written or restored, with why."""


@dataclass(frozen=True)
class CourseFiles:
    """The folders of a course beside its store: the spool and the stored reports (either may be absent)."""
    spool: Path
    reports: Path


@dataclass(frozen=True)
class Summary:
    """What an archive holds, as its manifest says."""
    grader: str
    schema: int
    store: str  # sqlite | postgresql
    created_at: str
    files: dict[str, str]  # member -> sha256

    def count(self, prefix: str) -> int:
        return sum(1 for name in self.files if name.startswith(prefix + "/"))


def reports_folder(store_path: Path) -> Path:
    """Where `grader submit` keeps the reports it writes: a `reports/` folder beside the store."""
    return store_path.parent / REPORTS


# -- writing ---------------------------------------------------------------------------------------
def write_backup(store: Store, archive: Path, files: CourseFiles) -> Summary:
    """Write the course's archive to `archive` (a new file, 0600); its summary."""
    try:
        descriptor = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        raise BackupError(f"{archive} exists already: name a new file") from None
    os.fchmod(descriptor, PRIVATE_FILE)  # exactly 0600 whatever the umask
    members: dict[str, str] = {}
    try:
        with private_folder() as work, os.fdopen(descriptor, "wb") as out, \
                tarfile.open(fileobj=out, mode="w:gz") as tar:
            dump = work / "store"
            store_member = dump_store(store, dump)
            members[store_member] = add_file(tar, store_member, dump)
            for prefix, folder in ((SPOOL, files.spool), (REPORTS, files.reports)):
                for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                    if path.is_file() and not path.is_symlink():
                        name = f"{prefix}/{path.relative_to(folder).as_posix()}"
                        members[name] = add_file(tar, name, path)
            summary = Summary(grader=__version__, schema=store.version,
                              store="sqlite" if store.is_sqlite else "postgresql", created_at=utc_now(),
                              files=members)
            manifest = json.dumps({"format": FORMAT, "grader": summary.grader, "schema": summary.schema,
                                   "store": summary.store, "created_at": summary.created_at,
                                   "secrets": list(SECRETS), "files": members}, indent=2).encode()
            add_bytes(tar, MANIFEST, manifest)
    except BaseException:
        archive.unlink(missing_ok=True)  # never a half-written archive that looks like a backup
        raise
    return summary


def dump_store(store: Store, target: Path) -> str:
    """Copy the store into `target`; the archive member it becomes."""
    if store.is_sqlite:
        create_private_file(target)
        source = sqlite3.connect(store.path)
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)  # SQLite's online backup: consistent while others write
        finally:
            copy.close()
            source.close()
        return SQLITE_MEMBER
    run_pg("pg_dump", store.engine.url, ["--format=custom", "--no-owner", "--no-privileges", f"--file={target}"])
    return POSTGRES_MEMBER


def add_file(tar: tarfile.TarFile, name: str, path: Path) -> str:
    data = path.read_bytes()
    add_bytes(tar, name, data)
    return hashlib.sha256(data).hexdigest()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), PRIVATE_FILE
    tar.addfile(info, io.BytesIO(data))


# -- reading and restoring -------------------------------------------------------------------------
def read_archive(archive: Path) -> tuple[Summary, dict[str, bytes]]:
    """The manifest and every member of an archive, each checked against the manifest's digest."""
    contents: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for info in tar:
                if not info.isfile():
                    raise BackupError(f"{archive}: {info.name!r} is not a plain file; not a grader backup")
                member = tar.extractfile(info)
                assert member is not None
                contents[safe_name(archive, info.name)] = member.read()
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BackupError(f"{archive}: not a readable grader backup ({exc})") from None
    try:
        manifest = json.loads(contents.pop(MANIFEST))
        summary = Summary(grader=str(manifest["grader"]), schema=int(manifest["schema"]),
                          store=str(manifest["store"]), created_at=str(manifest["created_at"]),
                          files={str(k): str(v) for k, v in manifest["files"].items()})
        if manifest["format"] != FORMAT or summary.store not in ("sqlite", "postgresql"):
            raise ValueError(f"format {manifest['format']} of a {summary.store} store")
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise BackupError(f"{archive}: no usable manifest.json ({exc}); not a grader backup") from None
    if set(contents) != set(summary.files):
        raise BackupError(f"{archive}: its files and its manifest differ ({sorted(set(contents) ^ set(summary.files))})")
    for name, data in contents.items():
        if hashlib.sha256(data).hexdigest() != summary.files[name]:
            raise BackupError(f"{archive}: {name} does not match its digest in the manifest; the archive is damaged")
    return summary, contents


def safe_name(archive: Path, name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise BackupError(f"{archive}: member {name!r} points outside the archive's folders; not restored")
    if name != MANIFEST and path.parts[0] not in ("store", SPOOL, REPORTS):
        raise BackupError(f"{archive}: member {name!r} is not part of a grader backup")
    return path.as_posix()


def restore_backup(archive: Path, location: str, files: CourseFiles, replace: bool = False) -> Summary:
    """Bring the archive's course back into the store at `location` and the folders beside it."""
    summary, contents = read_archive(archive)
    store_member = SQLITE_MEMBER if summary.store == "sqlite" else POSTGRES_MEMBER
    if store_member not in contents:
        raise BackupError(f"{archive}: it holds no store ({store_member})")
    target_is_sqlite = sqlite_path(location) is not None
    if target_is_sqlite != (summary.store == "sqlite"):
        raise BackupError(f"{archive} holds a {summary.store} store; restore it into a "
                          f"{'file' if summary.store == 'sqlite' else 'postgresql:// URL'}")
    if target_is_sqlite:
        make_private_folder(Path(str(sqlite_path(location))).parent)
    engine = make_engine(location)
    try:
        clear_store(engine, location, replace)
        with private_folder() as work:
            dump = work / "store"
            dump.write_bytes(contents[store_member])
            if target_is_sqlite:
                engine.dispose()
                restore_sqlite(dump, Path(str(sqlite_path(location))))
            else:
                run_pg("pg_restore", engine.url, ["--no-owner", "--no-privileges", "--single-transaction",
                                                  "--exit-on-error", str(dump)])
    finally:
        engine.dispose()
    Store(location).close()  # upgraded to this grader's schema now, not by the first process to open it
    for prefix, folder in ((SPOOL, files.spool), (REPORTS, files.reports)):
        for name, data in contents.items():
            if name.startswith(prefix + "/"):
                write_member(folder, PurePosixPath(name).relative_to(prefix), data)
    return summary


def clear_store(engine: Engine, location: str, replace: bool) -> None:
    """Empty the target store (every table dropped), after checking it holds no course unless `replace`."""
    tables = MetaData()
    tables.reflect(engine)
    with engine.connect() as connection:
        held = {name: connection.execute(select(func.count()).select_from(tables.tables[name])).scalar() or 0
                for name in COURSE_TABLES if name in tables.tables}
    if any(held.values()) and not replace:
        described = ", ".join(f"{count} {name}" for name, count in held.items() if count)
        raise BackupError(f"{make_url(location).render_as_string(hide_password=True) if '://' in location else location}"
                          f" already holds a course ({described}); restore into an empty store, or pass --replace "
                          "to replace it")
    tables.drop_all(engine)


def restore_sqlite(dump: Path, target: Path) -> None:
    for leftover in (target, target.with_name(target.name + "-wal"), target.with_name(target.name + "-shm")):
        leftover.unlink(missing_ok=True)
    create_private_file(target)
    source, copy = sqlite3.connect(dump), sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()


def write_member(folder: Path, relative: PurePosixPath, data: bytes) -> None:
    path = folder.joinpath(*relative.parts)
    make_private_folder(path.parent)
    if path.exists():
        return  # the same spooled submission or report, already there
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)


# -- PostgreSQL's own tools ------------------------------------------------------------------------
def run_pg(tool: str, url: URL, arguments: list[str]) -> None:
    """Run pg_dump or pg_restore on the database at `url`; its password goes in the environment, never
    on a command line that `ps` shows."""
    if shutil.which(tool) is None:
        raise BackupError(f"{tool} is not installed: it comes with PostgreSQL's client (Debian: apt-get install "
                          "postgresql-client), of the server's major version or newer")
    connection = [f"--dbname={url.database}", f"--host={url.host or 'localhost'}", f"--port={url.port or 5432}"]
    if url.username:
        connection.append(f"--username={url.username}")
    environment = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    if url.password:
        environment["PGPASSWORD"] = str(url.password)
    done = subprocess.run([tool, *connection, "--no-password", *arguments], env=environment, capture_output=True,
                          text=True, timeout=PG_TIMEOUT_S)
    if done.returncode != 0:
        raise BackupError(f"{tool} failed (status {done.returncode}): {done.stderr.strip()[-2000:]}")


@contextlib.contextmanager
def private_folder() -> Iterator[Path]:
    """A temporary folder only its owner can read (a store's copy passes through it)."""
    folder = Path(tempfile.mkdtemp(prefix="grader-backup-"))  # mkdtemp makes it 0700
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
