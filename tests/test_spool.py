"""The spool of submissions kept while the store is away (grader.service.spool) and the sessions the
web service remembers for that time (grader.service.recent_sessions), without a web page: the files,
their checks, the bounds of what is remembered. The pages and the drain are in test_web_in_process."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from grader.course.store import Store
from grader.service.accounts import Session
from grader.service.recent_sessions import RecentSessions
from grader.service.spool import BROKEN, Spool, Spooled, SpoolFull, default_folder

pytestmark = pytest.mark.unit

ARRIVED = datetime(2026, 3, 1, 9, 30, 5, tzinfo=timezone.utc)


def test_a_file_altered_or_cut_short_is_set_aside_and_never_blocks_the_others(tmp_path):
    spool = Spool(tmp_path / "spool")
    altered = spool.keep("ada", "ex", "free", "a.py", b"x = 1\n", ARRIVED).path
    kept = spool.keep("bob", "ex", "free", "a.py", b"y = 1\n", ARRIVED).path
    assert altered is not None and kept is not None
    raw = json.loads(altered.read_text())
    altered.write_text(json.dumps({**raw, "sha256": "0" * 64}))
    cut = tmp_path / "spool" / "20260301T000000000000-cut.json"
    cut.write_text(kept.read_text()[:40])
    with pytest.raises(ValueError, match="sha256"):
        Spooled.from_file(altered)
    with Store(tmp_path / "grader.db") as store:
        queued: list[int] = []
        assert spool.drain(store, queued.append) == 1
        [sub] = store.submissions()
        assert sub.student == "bob" and sub.submitted_at == ARRIVED.isoformat(timespec="seconds") and queued == [sub.id]
    assert spool.files() == [] and sorted(p.name.endswith(BROKEN) for p in spool.folder.iterdir()) == [True, True]


def test_the_spool_holds_a_bounded_number_of_bytes_in_all(tmp_path):
    spool = Spool(tmp_path / "spool", max_total_bytes=4096)
    spool.keep("ada", "ex", "free", "a.py", b"x" * 1000, ARRIVED)
    with pytest.raises(SpoolFull, match="space"):
        spool.keep("bob", "ex", "free", "a.py", b"y" * 3000, ARRIVED)
    assert spool.count() == 1 and not list(spool.folder.glob(".*"))  # no temporary file left


def test_the_spool_lies_beside_an_sqlite_store(tmp_path):
    with Store(tmp_path / "class.db") as store:
        assert default_folder(store) == tmp_path / "class.db.spool"


def test_a_remembered_session_expires_with_its_time_or_its_own_end_and_the_oldest_go_first():
    now = [1000.0]
    recent = RecentSessions(ttl_s=900, max_entries=2, clock=lambda: now[0])
    ada = Session("student", "ada", "free", "c", expires_at=1300.0)
    bob = Session("student", "bob", "free", "c", expires_at=10_000.0)
    recent.remember("ada-token", ada)
    recent.remember("bob-token", bob)
    assert recent.recall("ada-token") == ada and recent.recall("nobody") is None
    now[0] = 1300.0  # ada's session has ended, though it was verified less than 15 minutes ago
    assert recent.recall("ada-token") is None and recent.recall("bob-token") == bob
    now[0] = 1900.0  # 15 minutes since bob's was verified
    assert recent.recall("bob-token") is None
    for n in range(3):
        recent.remember(f"t{n}", bob)
    assert recent.recall("t0") is None and recent.recall("t2") == bob
    recent.remember("t2", None)  # the store says it has no such session any more
    assert recent.recall("t2") is None
    recent.forget_student("bob")
    assert recent.recall("t1") is None
