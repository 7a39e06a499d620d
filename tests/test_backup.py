"""`grader backup` and `grader restore`: one archive of a course, owner-only, that brings every row of the
store, the spool's waiting submissions and the stored reports back into a fresh store."""

from __future__ import annotations

import json
import stat
import tarfile

import pytest

from grader.cli import main
from grader.course.backup import SECRETS, BackupError, CourseFiles, read_archive, restore_backup, write_backup
from grader.course.store import Store
from tests.course_content import course_tables, fill_course, table_rows

SPOOLED = {"student": "carol", "exercise": "continuous_batching", "tier": "premium", "filename": "scheduler.py",
           "content": "TElNSVQgPSAxCg==", "arrived": "2026-12-03T08:00:00+00:00", "sha256": "x"}


def course_at(location: str, tmp_path) -> tuple[Store, CourseFiles]:
    store = Store(location)
    fill_course(store)
    files = CourseFiles(spool=tmp_path / "old" / "spool", reports=tmp_path / "old" / "reports")
    (files.spool).mkdir(parents=True)
    (files.spool / "1733212800-carol.json").write_text(json.dumps(SPOOLED))
    (files.reports / "alice").mkdir(parents=True)
    (files.reports / "alice" / "continuous_batching-1.html").write_text("<p>9/10</p>")
    return store, files


def check_restored(old: Store, new_location: str, files: CourseFiles, new_files: CourseFiles) -> None:
    with Store(new_location) as new:
        before, after = table_rows(old), table_rows(new)
        for table in course_tables():
            assert before[table], f"the course has no {table} to compare"
            assert after[table] == before[table], table
        assert after == before
    for kind in ("spool", "reports"):
        old_files = {p.relative_to(getattr(files, kind)): p.read_bytes()
                     for p in getattr(files, kind).rglob("*") if p.is_file()}
        new_files_found = {p.relative_to(getattr(new_files, kind)): p.read_bytes()
                           for p in getattr(new_files, kind).rglob("*") if p.is_file()}
        assert new_files_found == old_files and old_files
        for path in getattr(new_files, kind).rglob("*"):
            assert stat.S_IMODE(path.stat().st_mode) in (0o600, 0o700), path


@pytest.mark.unit
def test_a_backup_restored_into_a_fresh_sqlite_store_is_the_same_course(tmp_path):
    old, files = course_at(str(tmp_path / "class.db"), tmp_path)
    archive = tmp_path / "course.tar.gz"
    summary = write_backup(old, archive, files)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert summary.count("spool") == 1 and summary.count("reports") == 1
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["secrets"] == list(SECRETS) == ["session_key", "lti_private_key"]
    new_files = CourseFiles(spool=tmp_path / "new" / "spool", reports=tmp_path / "new" / "reports")
    restore_backup(archive, str(tmp_path / "new" / "class.db"), new_files)
    assert stat.S_IMODE((tmp_path / "new" / "class.db").stat().st_mode) == 0o600
    check_restored(old, str(tmp_path / "new" / "class.db"), files, new_files)
    old.close()


@pytest.mark.unit
def test_a_restore_refuses_a_store_that_holds_a_course_and_a_damaged_archive(tmp_path):
    old, files = course_at(str(tmp_path / "class.db"), tmp_path)
    archive = tmp_path / "course.tar.gz"
    write_backup(old, archive, files)
    with pytest.raises(BackupError, match="exists already"):
        write_backup(old, archive, files)
    with pytest.raises(BackupError, match="already holds a course .*--replace"):
        restore_backup(archive, str(tmp_path / "class.db"), files)
    restore_backup(archive, str(tmp_path / "class.db"), files, replace=True)  # told: replaced, the same course
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(archive) as source, tarfile.open(damaged, "w:gz") as out:
        for info in source:
            data = source.extractfile(info).read()
            if info.name.startswith("reports/"):
                data = b"<p>10/10</p>"
                info.size = len(data)
            import io
            out.addfile(info, io.BytesIO(data))
    with pytest.raises(BackupError, match="does not match its digest"):
        read_archive(damaged)
    old.close()


@pytest.mark.unit
def test_the_commands_back_up_and_restore_with_the_default_folders_beside_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old, _ = course_at(str(tmp_path / "class.db"), tmp_path)
    spool = tmp_path / "class.db.spool"  # serve's default for class.db
    spool.mkdir(mode=0o700)
    (spool / "1733212800-carol.json").write_text(json.dumps(SPOOLED))
    assert main(["backup", "--db", "class.db", "--out", "b.tar.gz"]) == 0
    (tmp_path / "fresh").mkdir()
    assert main(["restore", "b.tar.gz", "--db", "fresh/class.db"]) == 0
    assert (tmp_path / "fresh" / "class.db.spool" / "1733212800-carol.json").read_text() == json.dumps(SPOOLED)
    with Store(tmp_path / "fresh" / "class.db") as new:
        assert table_rows(new) == table_rows(old)
    assert main(["restore", "b.tar.gz", "--db", "fresh/class.db"]) == 2  # a course there: refused
    old.close()


def test_a_backup_of_postgres_restored_into_a_fresh_database_is_the_same_course(tmp_path, postgres_url):
    from tests.servers import fresh_database

    old, files = course_at(fresh_database(postgres_url), tmp_path)
    archive = tmp_path / "course.tar.gz"
    write_backup(old, archive, files)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    target = fresh_database(postgres_url)
    Store(target).close()  # a fresh server's web service has made its empty schema already
    new_files = CourseFiles(spool=tmp_path / "new" / "spool", reports=tmp_path / "new" / "reports")
    restore_backup(archive, target, new_files)
    check_restored(old, target, files, new_files)
    old.close()


@pytest.mark.unit
def test_grader_db_may_name_a_database_url_as_the_stacks_containers_set_it(monkeypatch, tmp_path):
    from grader.cli.common import store_location

    monkeypatch.setenv("GRADER_DB", "postgresql://grader:secret@postgres:5432/grader")
    assert store_location(None) == "postgresql://grader:secret@postgres:5432/grader"
    assert store_location(str(tmp_path / "given.db")) == str(tmp_path / "given.db")  # --db wins
    monkeypatch.setenv("GRADER_DB", str(tmp_path / "class.db"))
    assert store_location(None) == str(tmp_path / "class.db")
