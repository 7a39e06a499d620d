"""Submissions kept on disk while the store is away, stored as soon as it is back.

The store is the truth, but a database restart or a lost network takes it away for a while; a student
who submits then should not be refused (and lose the work of the minute if they do not notice). So the
web service writes such a submission to a spool folder, one JSON file each, and acknowledges it as
kept; a drainer in the serve process stores every spooled file once the database answers again, and
hands it to the graders.

Why it is safe:
- Each file is written atomically (a temporary file, fsync, rename, fsync of the folder): a crash leaves
  either the whole file or none, never half of one that the drainer would choke on.
- Storing is idempotent: `jobs.submit` finds a submission already stored with the same student,
  exercise, tier and content, so a crash between storing a file and deleting it stores nothing twice.
- A submission keeps the moment it arrived as its `submitted_at`: lateness is judged by when the student
  handed it in, not by when the database came back.
- The spool is bounded (files per student, bytes in all), so an outage cannot be used to fill the disk.
- The folder is the owner's only (0700, files 0600): it holds students' code, as the store does.

Each serve process has its own spool and drains it; files left by a serve stopped during an outage
are drained by the next one started on the same folder.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy.exc import InterfaceError, OperationalError

from grader.course.store import Store, store_files_path
from grader.db.engine import PRIVATE_FILE, make_private_folder, sqlite_path
from grader.service import jobs

log = logging.getLogger("grader.spool")

MAX_PER_STUDENT = 10  # files one student may have waiting: far more than an outage of minutes calls for
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # all files waiting, every student together
DRAIN_EVERY_S = 2.0
SUFFIX = ".json"
BROKEN = ".broken"  # a file the drainer cannot read: set aside for a person to look at, never deleted
# What a store that cannot be reached raises (a PostgreSQL restart, a lost connection, an SQLite file
# that cannot be opened): the drainer waits for the next round on these, and only these.
STORE_AWAY = (OperationalError, InterfaceError)


class SpoolFull(Exception):
    """A submission the spool does not take: the student has too many waiting, or the spool is full.
    The message says which, for the student."""


@dataclass(frozen=True)
class Spooled:
    """One submission waiting in the spool."""
    student: str
    exercise: str
    tier: str
    filename: str
    content: bytes
    arrived: datetime  # with its zone: it becomes the submission's `submitted_at`
    sha256: str
    path: Path | None = None

    def to_json(self) -> str:
        return json.dumps({"student": self.student, "exercise": self.exercise, "tier": self.tier,
                           "filename": self.filename, "content": base64.b64encode(self.content).decode("ascii"),
                           "arrived": self.arrived.isoformat(), "sha256": self.sha256}, sort_keys=True)

    @classmethod
    def from_file(cls, path: Path) -> Spooled:
        """The submission of a spool file; ValueError when it is not one whole and true (its content
        does not match its sha256, a field is missing, the time has no zone)."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            content = base64.b64decode(raw["content"], validate=True)
            arrived = datetime.fromisoformat(raw["arrived"])
            found = cls(str(raw["student"]), str(raw["exercise"]), str(raw["tier"]), str(raw["filename"]),
                        content, arrived, str(raw["sha256"]), path)
        except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a spooled submission: {exc}") from None
        if arrived.tzinfo is None:
            raise ValueError("its arrival time has no time zone")
        if hashlib.sha256(content).hexdigest() != found.sha256:
            raise ValueError("its content does not match its sha256")
        return found


@dataclass
class Spool:
    """The spool folder and its bounds. `keep` writes a submission; `drain` stores what waits."""
    folder: Path
    max_per_student: int = MAX_PER_STUDENT
    max_total_bytes: int = MAX_TOTAL_BYTES
    # One request at a time checks the bounds and writes: requests sent at once cannot all pass the check.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def files(self) -> list[Path]:
        """The files waiting, oldest first (their names start with the arrival time)."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))

    def count(self) -> int:
        return len(self.files())

    def keep(self, student: str, exercise: str, tier: str, filename: str, content: bytes,
             arrived: datetime) -> Spooled:
        """Write the submission to the spool, durably, and return it; SpoolFull when a bound says no."""
        sha = hashlib.sha256(content).hexdigest()
        entry = Spooled(student, exercise, tier, filename, content, arrived, sha)
        data = entry.to_json().encode("utf-8")
        with self.lock:
            self.check_bounds(student, len(data))
            make_private_folder(self.folder)
            # The name sorts by arrival and tells whose it is; the random part keeps two at one moment apart.
            stamp = arrived.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
            name = f"{stamp}-{secrets.token_hex(4)}-{hashlib.sha256(student.encode()).hexdigest()[:12]}{SUFFIX}"
            path = self.folder / name
            write_atomically(path, data)
        log.warning("the store is away: submission of %s to %s (sha256 %s) kept in the spool as %s",
                    student, exercise, sha[:12], name)
        return Spooled(student, exercise, tier, filename, content, arrived, sha, path)

    def check_bounds(self, student: str, size: int) -> None:
        mine = hashlib.sha256(student.encode()).hexdigest()[:12]
        files = self.files()
        if sum(1 for p in files if p.name.removesuffix(SUFFIX).endswith(mine)) >= self.max_per_student:
            raise SpoolFull(f"You already have {self.max_per_student} submissions kept on this server, waiting "
                            "for the database to come back: that is the most it keeps for one student. Nothing "
                            "more was kept. Keep your code and submit it again once the service is back.")
        used = sum(p.stat().st_size for p in files)
        if used + size > self.max_total_bytes:
            raise SpoolFull("The space this server keeps for submissions while its database is away is full. "
                            "Nothing was kept. Keep your code and submit it again once the service is back.")

    def drain(self, store: Store, enqueue: Callable[[int], None]) -> int:
        """Store every waiting file, oldest first, and hand each new submission to `enqueue`; the number
        stored. Stops at the first sign that the store is still away (the rest wait for the next round).

        No interval between submissions is applied: a file's arrival may come before a submission stored
        since, and the student was told it would be stored. A file that cannot be read is renamed aside
        (`.broken`) and logged, so it never blocks the others."""
        stored = 0
        for path in self.files():
            try:
                entry = Spooled.from_file(path)
            except (ValueError, OSError) as exc:
                log.error("spool file %s cannot be stored (%s): set aside as %s%s", path, exc, path.name, BROKEN)
                path.rename(path.with_name(path.name + BROKEN))
                continue
            try:
                submission_id, new = jobs.submit(store, entry.student, entry.exercise, entry.tier, entry.filename,
                                                 entry.content, interval_s=None, moment=entry.arrived)
            except STORE_AWAY:
                raise
            except Exception:  # a fault with this file alone: it stays, and the others are stored
                log.exception("spool file %s could not be stored; it stays for the next round", path)
                continue
            # Stored (or found stored by an earlier round): only now may the file go.
            if new:
                try:
                    enqueue(submission_id)
                except Exception:  # stored as queued all the same: the queue's watcher sends it when back
                    log.exception("spooled submission %s stored but not sent to the queue yet", submission_id)
            path.unlink(missing_ok=True)
            fsync_folder(self.folder)
            stored += 1
            log.info("spooled submission of %s to %s stored as submission %s (arrived %s)", entry.student,
                     entry.exercise, submission_id, entry.arrived.isoformat(timespec="seconds"))
        return stored


def write_atomically(path: Path, data: bytes) -> None:
    """`data` in `path`, whole or not at all, and on disk before this returns (owner-only)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE)  # the umask may have cut the mode: say it exactly
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
        os.fsync(descriptor)
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise
    os.close(descriptor)
    os.replace(temporary, path)
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Make a rename or a deletion in `folder` durable (the folder's entry list is data of its own)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems cannot sync a folder; the rename is still atomic
    finally:
        os.close(descriptor)


def default_folder(store: Store) -> Path:
    """Where a serve process keeps its spool unless told: beside an SQLite file (`class.db.spool`), or
    in the folder of the store's files for a database server."""
    return default_folder_of(store.location)


def default_folder_of(location: str) -> Path:
    """default_folder for the store at `location`, without opening it."""
    path = store_files_path(location)
    if sqlite_path(location) is not None:
        return path.with_name(path.name + ".spool")
    return path / "spool"


class Drainer:
    """A thread of the serve process that stores the spool's files every `every_s` seconds, the first
    round at once (files left by an earlier serve process are stored as soon as this one starts)."""

    def __init__(self, spool: Spool, store: Store, enqueue: Callable[[int], None],
                 every_s: float = DRAIN_EVERY_S) -> None:
        self.spool, self.store, self.enqueue, self.every_s = spool, store, enqueue, every_s
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="spool-drain", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, wait_s: float = 10.0) -> None:
        self.stopping.set()
        if self.thread.ident is not None:
            self.thread.join(wait_s)

    def run(self) -> None:
        away = False
        while not self.stopping.is_set():
            try:
                if self.spool.files():
                    self.spool.drain(self.store, self.enqueue)
                if away:
                    log.info("the store is back: the spool is drained")
                away = False
            except STORE_AWAY as exc:
                # One line when the store is found away, not one a round: an outage of minutes stays readable.
                if not away:
                    said = str(getattr(exc, "orig", None) or exc)
                    log.warning("the store cannot be reached (%s): %d spooled submission(s) wait; trying again "
                                "every %g s", said.splitlines()[0][:200] if said else type(exc).__name__,
                                self.spool.count(), self.every_s)
                away = True
            except Exception:  # a fault of ours: logged, and the files stay for the next round
                log.exception("storing the spooled submissions failed")
            self.stopping.wait(self.every_s)
