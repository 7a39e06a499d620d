"""`grader backup` and `grader restore`: a course's whole archive (the store, the spool, the stored reports,
and with the store its secrets), and its return on a fresh server (grader/course/backup.py)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import DB_HELP, OK, UsageError, store_location

if TYPE_CHECKING:
    from rich.console import Console

    from grader.course.backup import CourseFiles
    from grader.course.store import Store

SPOOL_HELP = "the spool folder given to `grader serve --spool` (default: serve's default for this store)"
EXAMPLES = {
    "backup": ["grader backup --db postgresql://grader@db/grader --spool /var/lib/grader/spool "
               "--out /backups/course-2026-12-07.tar.gz",
               "grader backup --db class.db"],
    "restore": ["grader restore /backups/course-2026-12-07.tar.gz --db postgresql://grader@db/grader "
                "--spool /var/lib/grader/spool",
                "grader restore course.tar.gz --db fresh.db"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = commands.add_parser("backup", help="write one archive of a course: its store (with the session and "
                                                "LTI keys), spool and stored reports, readable by you only")
    backup.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    backup.add_argument("--spool", metavar="DIR", help=SPOOL_HELP)
    backup.add_argument("--out", metavar="FILE",
                        help="the archive to write, a new file (default: grader-backup-YYYYmmdd-HHMMSS.tar.gz here)")
    backup.set_defaults(run=command_backup)

    restore = commands.add_parser("restore", help="bring a course back from a `grader backup` archive into an "
                                                  "empty store (stop `grader serve` and the workers first)")
    restore.add_argument("archive", help="the archive `grader backup` wrote")
    restore.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    restore.add_argument("--spool", metavar="DIR", help=SPOOL_HELP)
    restore.add_argument("--replace", action="store_true",
                         help="replace a store that already holds a course (by default such a store is refused)")
    restore.set_defaults(run=command_restore)


def course_files(store: Store, spool: str | None) -> CourseFiles:
    from grader.course.backup import CourseFiles, reports_folder
    from grader.service.spool import default_folder

    return CourseFiles(spool=Path(spool) if spool else default_folder(store), reports=reports_folder(store.path))


def command_backup(args: argparse.Namespace, console: Console) -> int:
    from grader.course.backup import write_backup
    from grader.course.store import Store

    location = store_location(args.db)
    if "://" not in location and not Path(location).is_file():
        raise UsageError(f"no store at {location}: give --db")
    out = Path(args.out or time.strftime("grader-backup-%Y%m%d-%H%M%S.tar.gz", time.gmtime()))
    with Store(location) as store:
        summary = write_backup(store, out, course_files(store, args.spool))
    console.print(f"{out}: the {summary.store} store (schema {summary.schema}), {summary.count('spool')} spooled "
                  f"submission(s), {summary.count('reports')} stored report(s). It holds the session key and the "
                  "LTI private key: keep it where only you can read it (it is written 0600).")
    return OK


def command_restore(args: argparse.Namespace, console: Console) -> int:
    from grader.course.backup import CourseFiles, reports_folder, restore_backup
    from grader.course.store import Store, store_files_path
    from grader.service.spool import default_folder_of

    archive = Path(args.archive)
    if not archive.is_file():
        raise UsageError(f"no archive at {archive}")
    location = store_location(args.db)
    # The folders beside the store, found without opening it (opening would migrate an empty store that the
    # restore is about to replace).
    files = CourseFiles(spool=Path(args.spool) if args.spool else default_folder_of(location),
                        reports=reports_folder(store_files_path(location)))
    summary = restore_backup(archive, location, files, replace=args.replace)
    with Store(location) as store:
        schema = store.version
    console.print(f"restored {archive} (grader {summary.grader}, {summary.created_at}) into {location.split('@')[-1]}: "
                  f"schema {summary.schema} -> {schema}, {summary.count('spool')} spooled submission(s) in "
                  f"{files.spool}, {summary.count('reports')} stored report(s)")
    return OK
