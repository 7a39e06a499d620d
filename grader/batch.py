"""Grading a folder of submissions in parallel sandboxes, into the store, resumably.

A folder holds one file per student (`alice.py`) or one folder per student holding the exercise's
file (`alice/scheduler.py`). What is already graded with the same content is skipped, so a batch
that was interrupted simply runs again. One broken submission never stops the others.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from grader.exercise import Exercise
from grader.grading import Backend, grade_bytes
from grader.scorecard import Scorecard
from grader.store import Store, StoreError, validate_student_id
from grader.text import valid_text
from grader.validate import read_capped


@dataclass
class Candidate:
    student: str
    path: Path
    problem: str = ""  # why it cannot be graded (no file, a bad student id...)


@dataclass
class BatchSummary:
    graded: list[tuple[str, Scorecard]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already graded with this content
    problems: list[tuple[str, str]] = field(default_factory=list)  # (student or entry, why)
    interrupted: bool = False


def discover(folder: Path, exercise: Exercise) -> list[Candidate]:
    if not folder.is_dir():
        raise StoreError(f"{folder}: not a folder of submissions")
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix == ".py":
            student, path = entry.stem, entry
        elif entry.is_dir():
            student, path = entry.name, entry / exercise.submission_file
        else:
            found.append(Candidate(entry.name, entry, "not a .py file or a student folder; ignored"))
            continue
        try:
            validate_student_id(student)
        except StoreError as exc:
            found.append(Candidate(student, path, str(exc)))
            continue
        if not path.is_file():
            found.append(Candidate(student, path, f"no {exercise.submission_file} in {entry}"))
            continue
        found.append(Candidate(student, path))
    return found


def run_batch(store: Store, exercise: Exercise, tier: str, make_backend: Callable[[], tuple[Backend, str]],
              candidates: list[Candidate], jobs: int = 1,
              on_start: Callable[[int], None] | None = None,
              on_done: Callable[[str, Scorecard | None, str], None] | None = None) -> BatchSummary:
    """Grade what is not graded yet, `jobs` at a time; each result is saved the moment it arrives."""
    summary = BatchSummary()
    todo: list[tuple[Candidate, bytes, str]] = []
    graded = {(s.student, s.sha256) for s in store.submissions(exercise.slug) if s.tier == tier and s.card}
    for candidate in candidates:
        if candidate.problem:
            summary.problems.append((candidate.student, candidate.problem))
            continue
        try:
            data = read_capped(candidate.path, exercise.max_submission_bytes)
        except OSError as exc:
            summary.problems.append((candidate.student, f"cannot read {candidate.path}: {exc.strerror}"))
            continue
        sha = hashlib.sha256(data).hexdigest()
        if (candidate.student, sha) in graded:
            summary.skipped.append(candidate.student)
        else:
            todo.append((candidate, data, sha))
    if on_start:
        on_start(len(todo))
    local = threading.local()
    backends: list[Backend] = []

    def grade_one(data: bytes) -> Scorecard:
        if not hasattr(local, "backend"):  # one backend (one engine connection, one warm sandbox) per thread
            local.backend = make_backend()
            backends.append(local.backend[0])
        backend, name = local.backend
        return grade_bytes(data, exercise, tier, backend, name)

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade") as pool:
        pending: dict[Future[Scorecard], tuple[Candidate, bytes, str]] = {
            pool.submit(grade_one, data): (candidate, data, sha) for candidate, data, sha in todo}
        def settle(future: Future[Scorecard]) -> None:
            candidate, data, sha = pending.pop(future)
            try:
                card = future.result()
            except KeyboardInterrupt:
                summary.interrupted = True
                return
            except Exception as exc:  # the grader failed on this one; the batch goes on
                report(candidate.student, None, f"not graded: {valid_text(exc, 500)}")
                return
            try:
                submission_id, _ = store.add_submission(candidate.student, exercise.slug, tier, sha,
                                                        candidate.path.name, data)
                store.save_scorecard(submission_id, card)
            except Exception as exc:  # storing this one failed (each save is its own transaction): go on
                report(candidate.student, None, f"graded but not stored: {type(exc).__name__}: {valid_text(exc, 500)}")
                return
            summary.graded.append((candidate.student, card))
            report(candidate.student, card, "")

        def report(student: str, card: Scorecard | None, problem: str) -> None:
            if problem:
                summary.problems.append((student, problem))
            if on_done:
                try:
                    on_done(student, card, problem)
                except Exception:  # a progress display must never cost another student's result
                    pass

        try:
            while pending and not summary.interrupted:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:  # save every finished grading before acting on an interrupt
                    settle(future)
        except KeyboardInterrupt:  # Ctrl-C while waiting
            summary.interrupted = True
        if summary.interrupted:
            pool.shutdown(wait=True, cancel_futures=True)
            for future in [f for f in pending if f.done() and not f.cancelled()]:
                settle(future)  # gradings that were under way when the interrupt came are kept too
    for backend in backends:
        close = getattr(backend, "close", None)
        if close is not None:
            close()  # the sandboxes still waiting for a submission
    return summary
