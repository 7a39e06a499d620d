"""`grader publish`: a static site from the store, readable from disk or from any static host.

    index.html                       the class overview, per exercise: score histogram, pass rate per
                                     test (hardest first), submissions per student, downloads
    students/<name>.html             one page per student: their submissions and their report(s)
    gradebook-<exercise>.csv|.json   the gradebook of each exercise

Every page is rendered from stored scorecards with the report templates; links are relative, and
nothing is fetched. With `pseudonymous`, students appear under stable pseudonyms derived from a key
kept in the store, so the same student keeps the same name from one publication to the next; the
instructor's map from pseudonym to student (`pseudonym_map`) is never part of the site.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grader
from grader.core.scorecard import stopped_at_time_limit
from grader.course.gradebook import entry_of, failed_tests, pick, timed_out_tests, to_csv, to_json, worth
from grader.course.store import Store, StoredSubmission
from grader.diagnosis.counts import misconception_counts
from grader.report import report_view
from grader.report.render import environment

if TYPE_CHECKING:
    from grader.course.deadlines import Deadlines

HISTOGRAM_BINS = 10


@dataclass
class Site:
    out: Path
    pages: list[Path]
    students: int
    exercises: int


def pseudonym(key: str, student: str) -> str:
    return "student-" + hmac.new(key.encode(), student.encode(), hashlib.sha256).hexdigest()[:8]


def pseudonym_map(store: Store) -> dict[str, str]:
    """{pseudonym: student} for every student a pseudonymous site shows (those with a graded submission)."""
    key = store.setting("pseudonym_key")
    students = {s.student for s in store.submissions() if s.card is not None}
    return dict(sorted((pseudonym(key, student), student) for student in students))


def histogram(scores: list[tuple[int, int]]) -> dict[str, Any]:
    """Counts of students per 10% band of the score, as bars of an inline SVG."""
    counts = [0] * HISTOGRAM_BINS
    for score, max_score in scores:
        fraction = score / max_score if max_score else 0.0
        counts[min(HISTOGRAM_BINS - 1, int(fraction * HISTOGRAM_BINS))] += 1
    tallest = max(counts) or 1
    width, height, gap = 36, 120, 6
    bars = []
    for index, count in enumerate(counts):
        bar_height = round(count / tallest * height)
        bars.append({"x": index * (width + gap), "y": height - bar_height, "w": width, "h": bar_height,
                     "count": count, "label": f"{index * 10}–{index * 10 + 10}%" if index < 9 else "90–100%"})
    return {"bars": bars, "width": HISTOGRAM_BINS * (width + gap) - gap, "height": height}


def exercise_view(exercise: str, counted: list[tuple[str, StoredSubmission]],
                  attempts: dict[str, int], policy: str, names: dict[str, str] | None = None) -> dict[str, Any]:
    """The overview's section of an exercise; `names`, the roster's names of the students (by id), shown
    beside their ids."""
    cards = [sub.card for _, sub in counted if sub.card is not None]
    # The statistics are over results the grader vouches for: an error (a run stopped at the time limit)
    # is no 0, and is shown in the students' list with its status only.
    judged = [c for c in cards if c.status != "error"]
    # Out of the whole exercise's points: a tier that left tests out (free) is never counted as full marks.
    scores = [(c.score, c.exercise_max_score) for c in judged]
    percents = [100 * s / m if m else 0 for s, m in scores]
    tests: dict[str, dict[str, Any]] = {}
    for card in judged:
        for test in card.tests:
            row = tests.setdefault(test.name, {"name": test.name, "suite": card.suite_label(test.suite),
                                               "passed": 0, "ran": 0, "timed_out": 0,
                                               "description": test.description})
            row["ran"] += 1
            row["passed"] += test.status == "passed"
            row["timed_out"] += test.status == "timeout"
    for row in tests.values():
        row["rate"] = round(100 * row["passed"] / row["ran"]) if row["ran"] else 0
    # Each score out of the whole exercise's points, as the gradebook states it, with the tier beside it.
    students = [{"name": name, "full_name": (names or {}).get(name, ""), "page": f"students/{name}.html",
                 "attempts": attempts[name],
                 "score": sub.card.score if sub.card else 0,
                 "max_score": sub.card.exercise_max_score if sub.card else 0, "tier": sub.tier,
                 "status": result_status(sub), "failed": failed_tests(sub.card) if sub.card else 0,
                 "timed_out": timed_out_tests(sub.card) if sub.card else 0} for name, sub in counted]
    return {
        "slug": exercise, "title": cards[0].title if cards else exercise, "policy": policy,
        "students": sorted(students, key=lambda s: s["name"]),
        "submissions": sum(attempts.values()),
        "mean": round(statistics.mean(percents), 1) if percents else 0,
        "median": round(statistics.median(percents), 1) if percents else 0,
        "full_marks": sum(1 for s, m in scores if m and s == m),
        "left_out": len(cards) - len(judged),
        "rejected": sum(1 for c in judged if c.status == "rejected"),
        "histogram": histogram(scores),
        "tests": sorted(tests.values(), key=lambda t: (t["rate"], t["name"])),
        # Students per misconception their results look like (grader/diagnosis), the most common first.
        "misconceptions": [vars(row) for row in misconception_counts(judged)],
        "csv": f"gradebook-{exercise}.csv", "json": f"gradebook-{exercise}.json",
    }


def result_status(sub: StoredSubmission) -> str:
    """A result as the overview names it: a run stopped at the time limit is "timed out", not an error."""
    if sub.card is None:
        return "ungraded"
    return "timed out" if stopped_at_time_limit(sub.card) else sub.card.status


def build_site(store: Store, policy: str = "latest", pseudonymous: bool = False,
               deadlines: Deadlines | None = None, back: tuple[str, str] | None = None,
               include: Callable[[StoredSubmission], bool] | None = None) -> dict[str, str]:
    """Every file of the site, by its relative path (`index.html`, `students/<name>.html`, gradebooks):
    what `publish` writes to disk and what `grader serve` shows its instructors. `back`: (address, label)
    of the page its pages lead back to, where there is one (the dashboard of `grader serve`; a site read
    from disk has none). `include`: the submissions the site may count and show (None: every graded one);
    the others are left out as if never made, so no count, score or choice of the best depends on them."""
    submissions = [s for s in store.submissions() if s.card is not None and (include is None or include(s))]
    key = store.setting("pseudonym_key")
    name_of = (lambda sid: pseudonym(key, sid)) if pseudonymous else (lambda sid: sid)
    names = {} if pseudonymous else store.student_names()
    late = deadlines.is_late if deadlines is not None else (lambda sub: False)
    adjustments, predictions = store.adjustments(), store.prediction_results()
    chosen = pick(submissions, policy, late, worth=lambda sub: worth(sub, deadlines, adjustments))
    attempts: dict[tuple[str, str], int] = defaultdict(int)
    history: dict[str, list[StoredSubmission]] = defaultdict(list)
    for sub in submissions:
        attempts[(sub.exercise, name_of(sub.student))] += 1
        history[name_of(sub.student)].append(sub)
    by_exercise: dict[str, list[tuple[str, StoredSubmission]]] = defaultdict(list)
    for (student, exercise), sub in sorted(chosen.items()):
        by_exercise[exercise].append((name_of(student), sub))

    env = environment()
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    common = {"generated": generated, "policy": policy, "pseudonymous": pseudonymous,
              "grader_version": grader.__version__, "back": back}
    files: dict[str, str] = {}
    views = []
    for exercise, counted in sorted(by_exercise.items()):
        view = exercise_view(exercise, counted, {n: attempts[(exercise, n)] for n, _ in counted}, policy, names)
        views.append(view)
        # Under pseudonyms the gradebook names nobody: the roster's names are left out with the ids.
        entries = [entry_of(n, s, "" if pseudonymous else names.get(n, ""), deadlines, adjustments, predictions)
                   for n, s in counted if s.card is not None]
        files[view["csv"]] = to_csv(entries)
        files[view["json"]] = to_json(entries)
    files["index.html"] = env.get_template("site_index.html.j2").render(exercises=views, **common)
    for student, subs in sorted(history.items()):
        counted_ids = {chosen[(s.student, s.exercise)].id for s in subs if (s.student, s.exercise) in chosen}
        reports = [{"exercise": s.exercise, "r": report_view(s.card)} for s in subs
                   if s.id in counted_ids and s.card is not None]
        rows = [{"id": s.id, "exercise": s.exercise, "tier": s.tier, "submitted_at": s.submitted_at,
                 "score": s.card.score if s.card else 0, "max_score": s.card.max_score if s.card else 0,
                 "status": result_status(s) if s.card else "", "counted": s.id in counted_ids} for s in subs]
        files[f"students/{student}.html"] = env.get_template("site_student.html.j2").render(
            student=student, full_name=names.get(student, ""), history=rows, reports=reports, **common)
    return files


SITE_MARK = ".grader-site"  # in a site's folder: the files of its last publication, one a line
# What a site's files are named: a publication only ever removes a file of such a name that it listed.
SITE_FILE = re.compile(r"(students/)?[A-Za-z0-9][A-Za-z0-9._@-]*\.(html|csv|json)")


class SiteError(Exception):
    """The site cannot go where it was asked to (a folder of other files, a link)."""


def publish(store: Store, out: Path, policy: str = "latest", pseudonymous: bool = False,
            deadlines: Deadlines | None = None) -> Site:
    """Write the site into `out`. Published there before, the files of the earlier publication that
    this one has not (a student page under a real name before a pseudonymous publication, a student
    since deleted) are removed, and nothing else is touched (a `.git`, a `CNAME` stay). A folder that
    holds files and no earlier publication is refused. Each file is replaced whole (written beside,
    then renamed), so a reader never sees half a page and a link in the folder is replaced, not
    followed."""
    files = build_site(store, policy, pseudonymous, deadlines)
    out = Path(os.path.abspath(out))  # `.` is a folder with a name and a parent
    earlier = _earlier_files(out)
    out.mkdir(parents=True, exist_ok=True)
    for folder in (out, out / "students"):
        if folder.is_symlink():
            raise SiteError(f"{folder} is a link: give the site's folder itself")
    (out / "students").mkdir(exist_ok=True)
    for relative, content in files.items():
        _replace(out / relative, content)
    for relative in earlier - set(files):
        (out / relative).unlink(missing_ok=True)
    _replace(out / SITE_MARK, "".join(f"{name}\n" for name in sorted(files)))
    pages = [out / relative for relative in files if relative.endswith(".html")]
    return Site(out=out, pages=pages, students=sum(1 for p in files if p.startswith("students/")),
                exercises=sum(1 for p in files if p.endswith(".csv")))


def _earlier_files(out: Path) -> set[str]:
    """The files the publication in `out` wrote; refused when `out` holds files of no publication."""
    if out.is_symlink():
        raise SiteError(f"{out} is a link: give the site's folder itself")
    if not out.is_dir():
        return set()
    mark = out / SITE_MARK
    if not mark.is_file() or mark.is_symlink():
        if any(out.iterdir()):
            raise SiteError(f"{out} holds files that are not a site published by grader: publish into a new "
                            "or empty folder")
        return set()
    listed = mark.read_text(encoding="utf-8", errors="replace").splitlines()
    return {name for name in listed if SITE_FILE.fullmatch(name)}


def _replace(path: Path, content: str) -> None:
    """Write `path` whole: a temporary file beside it, renamed over it (a link there is replaced)."""
    handle, temporary = tempfile.mkstemp(prefix=".publishing-", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(content)
        os.chmod(temporary, 0o666 & ~_umask())  # as a file made with open(): the site is for others
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
