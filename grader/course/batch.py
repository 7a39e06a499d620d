"""Grading a folder of submissions in parallel sandboxes, into the store, resumably.

A folder holds one file per student (`alice.py`) or one folder per student holding the exercise's
file (`alice/scheduler.py`). What is already graded with the same content against the same exercise
(its fingerprint: suites, exercise.toml's grading settings, reference) is skipped, so a batch that was
interrupted simply runs again, and one run after a suite changed grades everyone again. A stored `error` result is always
retried. One broken submission never stops the others.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.audit.match import diagnose_graded
from grader.core.backend import Backend
from grader.core.exercise import Exercise
from grader.core.fingerprint import exercise_fingerprint
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard, stopped_at_time_limit, utc_now
from grader.core.validate import read_capped
from grader.course.student_ids import validate_student_id
from grader.errors import StoreError
from grader.text import valid_text

if TYPE_CHECKING:
    from grader.course.store import Store


@dataclass
class Candidate:
    student: str
    path: Path
    problem: str = ""  # why it cannot be graded (no file, a bad student id...)
    bad_name: bool = False  # its name is no student id: the instructor renames it, and `batch` fails until then
    ignored: bool = False  # no student's file (a README): said, not counted as a student not graded


OUTCOMES = ("graded", "rejected", "timed out", "error")


def outcome(card: Scorecard) -> str:
    """What a result is, for counting: graded (the tests ran), rejected (refused before running), timed
    out (stopped at the exercise's time limit) or error (the grader cannot vouch for it)."""
    if stopped_at_time_limit(card):
        return "timed out"
    return card.status


@dataclass
class BatchSummary:
    graded: list[tuple[str, Scorecard]] = field(default_factory=list)  # graded in this run
    skipped: list[str] = field(default_factory=list)  # already graded with this content and exercise
    problems: list[tuple[str, str]] = field(default_factory=list)  # (student or entry, why)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (entry, why): no student's file
    interrupted: bool = False
    # Every student's current result for the files of this batch, graded in this run or in an earlier
    # one (a resume): what the batch's counts and mean are about.
    results: dict[str, Scorecard] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        found = [outcome(card) for card in self.results.values()]
        return {name: found.count(name) for name in OUTCOMES}

    def mean(self) -> tuple[float, int] | None:
        """(mean score, how many results it is over): rejected files count as 0, results the grader
        cannot vouch for (error, timed out) are left out. None when nothing counts."""
        scores = [card.score for card in self.results.values() if card.status != "error"]
        return (sum(scores) / len(scores), len(scores)) if scores else None


def discover(folder: Path, exercise: Exercise) -> list[Candidate]:
    """Each student's file in `folder`, or why it cannot be graded. What is no student's (a README, a
    dot file, `__pycache__`) is `ignored`. A link that leads out of the student's own file or folder
    is not followed: a cloned repository could carry one to any file of this machine, or to another
    student's file in the class folder."""
    if not folder.is_dir():
        raise StoreError(f"{folder}: not a folder of submissions")
    root = folder.resolve()
    found: list[Candidate] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.suffix == ".py" and not entry.is_dir():
            student, path = entry.stem, entry
        elif entry.is_dir() or (entry.is_symlink() and not entry.exists()):
            student, path = entry.name, entry / exercise.submission_file
        else:
            found.append(Candidate(entry.name, entry, "not a .py file or a student folder", ignored=True))
            continue
        try:
            student = validate_student_id(student)
        except StoreError as exc:
            found.append(Candidate(student, path, f"{exc}; rename {entry.name} and run again", bad_name=True))
            continue
        found.append(Candidate(student, path, _problem_of(path, entry, root, exercise)))
    return _without_doubles(found)


def _problem_of(path: Path, entry: Path, root: Path, exercise: Exercise) -> str:
    """Why a student's file cannot be graded, or ""."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a link to nothing, a loop of links
        if path.is_symlink() or entry.is_symlink():
            return f"{path} is a link that leads to no file"
        if entry.is_dir():
            others = sorted(p.name for p in entry.glob("*.py"))
            holds = f" (it holds {', '.join(others[:5])})" if others else ""
            return f"no {exercise.submission_file} in {entry}{holds}"
        return f"{path} cannot be read"
    if not target.is_relative_to(root):
        return f"{path} is a link to {target}, outside the class folder: not followed"
    own = root / entry.name  # the student's own file, or own folder: a link may not lead out of it
    if target != own and not (entry.is_dir() and not entry.is_symlink() and target.is_relative_to(own)):
        return f"{path} is a link to {target}, not the student's own file: not followed"
    if not target.is_file():
        return f"{path} is not a file"
    return ""


def _without_doubles(found: list[Candidate]) -> list[Candidate]:
    """A student with both `alice.py` and `alice/` (or `Alice.py`) has two files and no rule says which
    counts: neither is graded, and both are named."""
    by_student: dict[str, list[Candidate]] = {}
    for candidate in found:
        if not candidate.ignored:  # Erin.py and erin.py too: one student to a spreadsheet or a file system
            by_student.setdefault(candidate.student.casefold(), []).append(candidate)
    for both in by_student.values():
        if len(both) > 1:
            for candidate in both:
                candidate.problem = (f"two files for {candidate.student}: {', '.join(str(c.path) for c in both)}; "
                                     "keep one and run again")
    return found


def run_batch(store: Store, exercise: Exercise, tier: str, make_backend: Callable[[], Backend],
              candidates: list[Candidate], jobs: int = 1,
              on_start: Callable[[int], None] | None = None,
              on_done: Callable[[str, Scorecard | None, str], None] | None = None,
              regrade: bool = False) -> BatchSummary:
    """Grade what is not graded yet (everything with `regrade`), `jobs` at a time; each result is saved
    the moment it arrives."""
    summary = BatchSummary()
    todo = _take_in(store, exercise, tier, candidates, summary, regrade)
    if on_start:
        on_start(len(todo))
    _Grading(store, exercise, tier, summary, on_done).run(todo, make_backend, jobs)
    return summary


# A file to grade: its candidate, its bytes, their sha256 and when it was taken in (stored once graded).
Taken = tuple[Candidate, bytes, str, str]


def _graded_before(store: Store, exercise: Exercise, tier: str) -> dict[tuple[str, str], Scorecard]:
    """The stored results that still hold, by (student, sha256): of this tier, graded against the
    exercise as it is now (its fingerprint), and not an error (always retried)."""
    fingerprint = exercise_fingerprint(exercise)
    return {(s.student, s.sha256): s.card for s in store.submissions(exercise.slug)
            if s.tier == tier and s.card and s.card.status != "error"
            and s.card.exercise_fingerprint == fingerprint}


def _take_in(store: Store, exercise: Exercise, tier: str, candidates: list[Candidate], summary: BatchSummary,
             regrade: bool) -> list[Taken]:
    """Each candidate's file, read: what cannot be graded goes to the summary's problems (or ignored), a
    file graded before with the same content is handed in again and skipped (unless `regrade`), and the
    rest is returned, to grade."""
    graded = _graded_before(store, exercise, tier)
    todo: list[Taken] = []
    for candidate in candidates:
        if candidate.ignored:
            summary.ignored.append((candidate.student, candidate.problem))
            continue
        if candidate.problem:
            summary.problems.append((candidate.student, candidate.problem))
            continue
        try:
            data = read_capped(candidate.path, exercise.max_submission_bytes)
        except OSError as exc:
            summary.problems.append((candidate.student, f"cannot read {candidate.path}: {exc.strerror}"))
            continue
        sha = hashlib.sha256(data).hexdigest()
        earlier = None if regrade else graded.get((candidate.student, sha))
        if earlier is None:
            todo.append((candidate, data, sha, utc_now()))  # taken in now, stored once graded
        elif _handed_in_again(store, exercise, tier, candidate, data, sha, summary):
            summary.skipped.append(candidate.student)
            summary.results[candidate.student] = earlier
    return todo


def _handed_in_again(store: Store, exercise: Exercise, tier: str, candidate: Candidate, data: bytes, sha: str,
                     summary: BatchSummary) -> bool:
    """A file graded before, stored again as the student's latest (it may be an earlier file than the
    student's last); False, with the problem in the summary, when it could not be stored."""
    try:
        store.add_submission(candidate.student, exercise.slug, tier, sha, candidate.path.name, data,
                             submitted_at=utc_now())
    except Exception as exc:
        summary.problems.append((candidate.student, f"not stored: {type(exc).__name__}: {valid_text(exc, 500)}"))
        return False
    return True


@dataclass
class _Grading:
    """The gradings of one batch, `jobs` at a time: each result is saved the moment it arrives, one that
    fails (to grade or to store) is a problem of its student and the batch goes on, and Ctrl-C keeps
    every grading already finished or under way."""
    store: Store
    exercise: Exercise
    tier: str
    summary: BatchSummary
    on_done: Callable[[str, Scorecard | None, str], None] | None
    local: threading.local = field(default_factory=threading.local)
    backends: list[Backend] = field(default_factory=list)

    def run(self, todo: list[Taken], make_backend: Callable[[], Backend], jobs: int) -> None:
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade") as pool:
            pending: dict[Future[Scorecard], Taken] = {
                pool.submit(self._grade, taken[1], make_backend): taken for taken in todo}
            self._collect(pool, pending)
        for backend in self.backends:
            backend.close()  # the sandboxes still waiting for a submission

    def _grade(self, data: bytes, make_backend: Callable[[], Backend]) -> Scorecard:
        if not hasattr(self.local, "backend"):  # one backend (one engine connection, one warm sandbox) per thread
            self.local.backend = make_backend()
            self.backends.append(self.local.backend)
        return grade_bytes(data, self.exercise, self.tier, self.local.backend, diagnose=diagnose_graded)

    def _collect(self, pool: ThreadPoolExecutor, pending: dict[Future[Scorecard], Taken]) -> None:
        try:
            while pending and not self.summary.interrupted:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:  # save every finished grading before acting on an interrupt
                    self._settle(future, pending)
        except KeyboardInterrupt:  # Ctrl-C while waiting
            self.summary.interrupted = True
        if self.summary.interrupted:
            pool.shutdown(wait=True, cancel_futures=True)
            for future in [f for f in pending if f.done() and not f.cancelled()]:
                self._settle(future, pending)  # gradings that were under way when the interrupt came are kept too

    def _settle(self, future: Future[Scorecard], pending: dict[Future[Scorecard], Taken]) -> None:
        candidate, data, sha, taken = pending.pop(future)
        try:
            card = future.result()
        except KeyboardInterrupt:
            self.summary.interrupted = True
            return
        except Exception as exc:  # the grader failed on this one; the batch goes on
            self._report(candidate.student, None, f"not graded: {valid_text(exc, 500)}")
            return
        try:
            submission_id, _ = self.store.add_submission(candidate.student, self.exercise.slug, self.tier, sha,
                                                         candidate.path.name, data, submitted_at=taken)
            self.store.save_scorecard(submission_id, card)
        except Exception as exc:  # storing this one failed (each save is its own transaction): go on
            self._report(candidate.student, None,
                         f"graded but not stored: {type(exc).__name__}: {valid_text(exc, 500)}")
            return
        self.summary.graded.append((candidate.student, card))
        self.summary.results[candidate.student] = card
        self._report(candidate.student, card, "")

    def _report(self, student: str, card: Scorecard | None, problem: str) -> None:
        if problem:
            self.summary.problems.append((student, problem))
        if self.on_done:
            try:
                self.on_done(student, card, problem)
            except Exception:  # a progress display must never cost another student's result
                pass
