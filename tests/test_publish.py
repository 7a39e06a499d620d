"""`grader publish`: the static site of a store, checked as files and in headless Chromium."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from grader.cli import main
from grader.course.publish import publish
from grader.course.store import Store
from tests import golden
from tests.browser import Page, problems, requests, screenshot
from tests.helpers import EXERCISE, REFERENCE, STUB, mutant_file

MUTANT = mutant_file("03_skip_blocked_head")
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", Path(tempfile.gettempdir()) / "grader-site-screenshots"))


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """alice: stub then reference; bob: reference then mutant; carol: the mutant once (their real
    scorecards, graded once and kept in tests/golden/), each handed in a minute after the one before."""
    db = tmp_path_factory.mktemp("store") / "class.db"
    cards = {STUB: golden.load("stub"), REFERENCE: golden.load("reference"), MUTANT: golden.load("mutant")}
    moment = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
    with Store(db) as store:
        for student, files in {"alice": [STUB, REFERENCE], "bob": [REFERENCE, MUTANT], "carol": [MUTANT]}.items():
            for path in files:
                moment += timedelta(minutes=1)
                submission, _ = store.add_submission(student, EXERCISE, "premium", cards[path].submission_sha256,
                                                     path.name, path.read_bytes(), submitted_at=moment.isoformat())
                store.save_scorecard(submission, cards[path])
    return db


def gradebook(site: Path) -> dict[str, dict[str, str]]:
    with open(site / f"gradebook-{EXERCISE}.csv") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@pytest.mark.unit
def test_the_latest_and_best_policies_count_different_submissions(store_path, tmp_path):
    with Store(store_path) as store:
        latest = publish(store, tmp_path / "latest", policy="latest")
        publish(store, tmp_path / "best", policy="best")
    assert latest.students == 3 and latest.exercises == 1
    full = str(gradebook(tmp_path / "latest")["alice"]["max_score"])
    assert gradebook(tmp_path / "latest")["alice"]["score"] == full  # stub first, reference last
    assert gradebook(tmp_path / "latest")["bob"]["score"] != full  # reference first, mutant last
    assert gradebook(tmp_path / "best")["bob"]["score"] == full
    data = json.loads((tmp_path / "best" / f"gradebook-{EXERCISE}.json").read_text())
    assert data["columns"][:5] == ["student", "name", "tier", "score", "max_score"] and len(data["rows"]) == 3
    index = (tmp_path / "latest" / "index.html").read_text()
    assert "students/alice.html" in index and "Pass rate per test" in index
    student = (tmp_path / "latest" / "students" / "bob.html").read_text()
    assert student.count("class=\"history-row") == 2  # both of bob's submissions are listed
    assert "first difference" in student  # the counted (mutant) report, with its trace, is on the page


@pytest.mark.unit
def test_pseudonyms_hide_ids_and_stay_stable(store_path, tmp_path):
    with Store(store_path) as store:
        publish(store, tmp_path / "one", pseudonymous=True)
        publish(store, tmp_path / "two", pseudonymous=True)
    for site in (tmp_path / "one", tmp_path / "two"):
        for page in site.rglob("*"):
            if page.is_file():
                text = page.read_text()
                assert not any(name in text for name in ("alice", "bob", "carol")), page
    assert sorted(p.name for p in (tmp_path / "one" / "students").iterdir()) == \
        sorted(p.name for p in (tmp_path / "two" / "students").iterdir())
    assert all(p.name.startswith("student-") for p in (tmp_path / "one" / "students").iterdir())


@pytest.mark.unit
def test_the_pseudonym_map_is_for_the_instructor_only_and_never_in_the_site(store_path, tmp_path, capsys):
    site, private = tmp_path / "site", tmp_path / "instructor" / "pseudonyms.csv"
    private.parent.mkdir()
    private.write_text("an older map\n")
    private.chmod(0o644)  # made readable by others: writing the map makes it owner-only again
    argv = ["publish", "--out", str(site), "--db", str(store_path)]  # pseudonymous by default
    assert main([*argv, "--pseudonym-map", str(private)]) == 0
    with open(private) as handle:
        mapping = {row["pseudonym"]: row["student"] for row in csv.DictReader(handle)}
    assert sorted(mapping.values()) == ["alice", "bob", "carol"]
    assert sorted(f"{p}.html" for p in mapping) == sorted(p.name for p in (site / "students").iterdir())
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    for page in site.rglob("*"):  # the site holds neither the map nor any name it would reveal
        if page.is_file():
            assert not any(name in page.read_text() for name in ("alice", "bob", "carol")), page
    # Inside the site, or with names, the map is refused before anything is written.
    for inside, why in ((site / "pseudonyms.csv", "outside --out"), (site / "students" / "map.csv", "outside --out"),
                        (site, "is a folder")):
        assert main([*argv, "--pseudonym-map", str(inside)]) == 2
        assert why in capsys.readouterr().err and not inside.is_file()
    assert main(["publish", "--out", str(tmp_path / "named"), "--db", str(store_path), "--names",
                 "--pseudonym-map", str(tmp_path / "map.csv")]) == 2
    assert "leave out --names" in capsys.readouterr().err
    assert not (tmp_path / "map.csv").exists() and not (tmp_path / "named").exists()
    # --pseudonymous, the default now, is still taken (scripts written before keep working), not with --names.
    assert main([*argv, "--pseudonymous", "--pseudonym-map", str(private)]) == 0
    assert main([*argv, "--pseudonymous", "--names"]) == 2 and "contradict" in capsys.readouterr().err


@pytest.mark.unit
def test_a_site_published_again_replaces_the_earlier_one_whole(store_path, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["publish", "--out", str(site), "--db", str(store_path), "--names"]) == 0
    assert (site / "students" / "alice.html").is_file()
    assert main(["publish", "--out", str(site), "--db", str(store_path)]) == 0
    pages = sorted(p.name for p in (site / "students").iterdir())
    assert len(pages) == 3 and not {"alice.html", "bob.html", "carol.html"} & set(pages)
    assert "alice" not in " ".join(p.read_text() for p in site.rglob("*.html"))
    assert oct(site.stat().st_mode & 0o777) == oct(0o777 & ~current_umask())
    assert oct((site / "index.html").stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


@pytest.mark.unit
def test_publishing_again_keeps_what_the_site_did_not_write_and_deletes_only_its_own(store_path, tmp_path,
                                                                                    monkeypatch):
    site = tmp_path / "site"
    assert main(["publish", "--out", str(site), "--db", str(store_path), "--names"]) == 0
    (site / ".git").mkdir()  # the site made a GitHub Pages repository
    (site / "CNAME").write_text("grades.example.edu\n")
    outside = tmp_path / "precious.html"
    outside.write_text("keep")
    mark = site / ".grader-site"
    mark.write_text(mark.read_text() + "../precious.html\nCNAME\n")  # a list that names other files
    (site / "students" / "alice.html").unlink()
    (site / "students" / "alice.html").symlink_to(outside)  # replaced, never written through
    monkeypatch.chdir(site)
    assert main(["publish", "--out", ".", "--db", str(store_path)]) == 0
    assert (site / ".git").is_dir() and (site / "CNAME").read_text() == "grades.example.edu\n"
    assert outside.read_text() == "keep" and not (site / "students" / "alice.html").exists()
    assert (site / "index.html").is_file() and not list(site.glob(".publishing-*"))


@pytest.mark.unit
def test_publish_refuses_a_folder_of_other_files_a_missing_store_and_a_file_for_out(store_path, tmp_path, capsys):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    assert main(["publish", "--out", str(mine), "--db", str(store_path)]) == 2
    assert "not a site published by grader" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]
    assert main(["publish", "--out", str(tmp_path / "site"), "--db", str(tmp_path / "typo.db")]) == 2
    assert "no store at" in capsys.readouterr().err and not (tmp_path / "typo.db").exists()
    (tmp_path / "link").symlink_to(mine)
    assert main(["publish", "--out", str(tmp_path / "link"), "--db", str(store_path)]) == 2
    assert "is a link" in capsys.readouterr().err and (mine / "todo.txt").is_file()
    (tmp_path / "afile").write_text("")
    assert main(["publish", "--out", str(tmp_path / "afile"), "--db", str(store_path)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["publish", "--out", str(tmp_path / "site"), "--db", str(store_path),
                 "--pseudonym-map", str(tmp_path / "nodir" / "map.csv")]) == 2
    assert "the folder" in capsys.readouterr().err and not (tmp_path / "site").exists()


@pytest.mark.unit
def test_a_result_the_grader_cannot_vouch_for_is_left_out_of_the_figures(tmp_path):
    from grader.core.scorecard import Scorecard

    with Store(tmp_path / "class.db") as store:
        for student, status, score in (("ann", "graded", 10), ("ben", "graded", 5), ("tim", "error", 0)):
            sid, _ = store.add_submission(student, EXERCISE, "free", student, "scheduler.py", b"x = 1\n")
            store.save_scorecard(sid, Scorecard(exercise=EXERCISE, tier="free", submission_sha256=student,
                                                status=status, score=score, max_score=10,
                                                reason="grading did not finish in 8 s" if status == "error" else ""))
        publish(store, tmp_path / "site")
    index = " ".join((tmp_path / "site" / "index.html").read_text().split())
    assert "<b>75.0%</b><span>mean score</span>" in index  # (100 + 50) / 2: tim is no 0
    assert "1 result the grader could not vouch for (error, timed out) left out of the figures" in index
    assert gradebook(tmp_path / "site")["tim"]["score"] == ""


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.unit
def test_the_cli_publishes_from_the_store_named_by_the_environment(store_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRADER_DB", str(store_path))
    assert main(["publish", "--out", str(tmp_path / "site"), "--policy", "best"]) == 0
    assert "published 3 students" in " ".join(capsys.readouterr().out.split())
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.unit
def test_the_cli_publishes_under_pseudonyms_unless_asked_for_names(store_path, tmp_path):
    assert main(["publish", "--out", str(tmp_path / "plain"), "--db", str(store_path)]) == 0
    everything = " ".join(p.read_text() for p in (tmp_path / "plain").rglob("*") if p.is_file())
    assert not any(name in everything for name in ("alice", "bob", "carol"))
    assert main(["publish", "--out", str(tmp_path / "named"), "--db", str(store_path), "--names"]) == 0
    assert {p.name for p in (tmp_path / "named" / "students").iterdir()} == {"alice.html", "bob.html", "carol.html"}


def links_of(page: Page) -> list[str]:
    """Every link's target as the browser resolves it (absolute, with its fragment)."""
    return page.locator("a[href]").evaluate_all("links => links.map(a => a.href)")


def test_the_site_opens_in_chromium_with_no_error_no_request_and_no_dead_link(store_path, tmp_path, new_page):
    with Store(store_path) as store:
        site = publish(store, tmp_path / "site", policy="latest")
    SHOTS.mkdir(parents=True, exist_ok=True)
    visited: set[Path] = set()
    for path in site.pages:
        page = new_page(1280, 900)  # a fresh context: only this page's requests and messages
        page.goto(path.as_uri())
        assert problems(page) == [], (path, problems(page))
        assert requests(page) == [path.as_uri()], (path, requests(page))
        for link in links_of(page):
            parsed = urlparse(link)
            assert parsed.scheme == "file", f"{path.name} links outside the site: {link}"
            target = Path(unquote(parsed.path))
            assert target.is_file(), f"{path.name} has a dead link: {link}"
            if parsed.fragment:
                assert f'id="{parsed.fragment}"' in target.read_text(), f"{path.name}: no #{parsed.fragment}"
        visited.add(path)
    assert len(visited) == 4  # the overview and three students
    page = new_page(1280, 900)
    page.goto((site.out / "index.html").as_uri())
    print("overview:", screenshot(page, SHOTS / "overview.png"))
    page.goto((site.out / "students" / "bob.html").as_uri())
    print("student page:", screenshot(page, SHOTS / "student.png"))
    phone = new_page(390, 844, mobile=True)
    phone.goto((site.out / "index.html").as_uri())
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    print("overview on a phone:", screenshot(phone, SHOTS / "overview-phone.png"))


@pytest.mark.unit
def test_the_best_submission_is_the_highest_share_of_its_points_and_an_error_never_beats_a_result(tmp_path):
    from grader.core.scorecard import Scorecard
    from grader.course.gradebook import pick

    with Store(tmp_path / "class.db") as store:
        for n, (tier, status, score, most) in enumerate((("premium", "graded", 60, 76), ("free", "graded", 9, 10),
                                                         ("premium", "error", 0, 76), ("free", "graded", 5, 10))):
            sid, _ = store.add_submission("ben", EXERCISE, tier, f"s{n}", "scheduler.py", f"x = {n}\n".encode())
            store.save_scorecard(sid, Scorecard(exercise=EXERCISE, tier=tier, submission_sha256=f"s{n}",
                                                status=status, score=score, max_score=most))
        best = pick(store.submissions(EXERCISE), "best")[("ben", EXERCISE)].card
        assert (best.tier, best.score) == ("free", 9)  # 90% beats 60 of 76 points (79%)
        latest = pick(store.submissions(EXERCISE), "latest")[("ben", EXERCISE)].card
        assert latest.score == 5


@pytest.mark.unit
def test_the_class_overview_counts_students_per_misconception(tmp_path):
    from grader.core.scorecard import Diagnosis, Scorecard, TestResult

    late = Diagnosis("13_first_token_late", "emits a request's first token a step late", 0.9)
    with Store(tmp_path / "class.db") as store:
        for student, found, score in (("ann", [late], 5), ("ben", [late], 5), ("cat", [], 5), ("dan", [late], 10)):
            sid, _ = store.add_submission(student, EXERCISE, "free", student, "scheduler.py", b"x = 1\n")
            test = TestResult("v::a", "test_a", "visible", "failed" if score < 10 else "passed", 0, 10)
            store.save_scorecard(sid, Scorecard(exercise=EXERCISE, tier="free", submission_sha256=student,
                                                status="graded", score=score, max_score=10, tests=[test],
                                                diagnosis=found))
        publish(store, tmp_path / "site")
    index = " ".join((tmp_path / "site" / "index.html").read_text().split())
    assert f'id="misconceptions-{EXERCISE}"' in index
    assert "<tr><td>emits a request&#39;s first token a step late<div class=\"muted\">13_first_token_late</div></td>" \
           "<td class=\"num\">2</td></tr>" in index  # dan has full marks: not counted
