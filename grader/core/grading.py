"""One submission from file to scorecard: validate, run a sandbox, judge what came back.

This is where the grader fails closed: a run without results, with results it cannot verify, or
with a test missing is an `error` scorecard with the reason, never a pass.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable

import grader
from grader.core.backend import Backend, RawRun
from grader.core.exercise import Exercise
from grader.core.fingerprint import exercise_fingerprint
from grader.core.scorecard import TIMED_OUT, Diagnosis, LockedTest, Scorecard, TestResult, utc_now
from grader.core.seeding import seed_for_source
from grader.core.suite_tests import check_tests, list_tests
from grader.core.validate import Rejected, validate
from grader.harness.contract import MESSAGE_CHARS, MutantRun, Results, Run, TestRecord, results_from_output
from grader.text import valid_text


def new_run(exercise: Exercise, source: bytes, seed: int | None = None, trace_lines: bool = False,
            mutant_run: MutantRun | None = None) -> Run:
    """What the host sends with a submission: a fresh nonce, which the harness's results must carry,
    and the submission's seed (grader.core.seeding; `audit` chooses others, to grade a mutant on several).
    Made here once a grading, and nowhere else."""
    return Run(nonce=secrets.token_hex(16), seed=seed_for_source(source, exercise) if seed is None else seed,
               trace_lines=trace_lines, mutant_run=mutant_run)


log = logging.getLogger("grader.grading")
HARNESS_TAIL_CHARS = 8000  # of what a harness that ended without results printed last: its traceback


# The misconceptions a judged card's failures look like (grader.audit.match.diagnose_graded): the
# grading that is read by a person passes it in; an audit or the making of the signatures has no use for it.
Diagnose = Callable[[Scorecard, Exercise], list[Diagnosis]]


def grade_bytes(data: bytes, exercise: Exercise, tier: str | None, backend: Backend,
                backend_name: str | None = None, seed: int | None = None, diagnose: Diagnose | None = None,
                lines: set[int] | None = None, arcs: set[tuple[int, int]] | None = None,
                mutant_run: MutantRun | None = None) -> Scorecard:
    """Grade `data` on `tier` (None: the exercise's default tier), the scorecard naming the backend by
    its own name unless `backend_name` says otherwise; the random workloads draw from the submission's
    own seed unless `seed` is given. `diagnose`, when given, tells the judged card its likely misconceptions.
    `lines`, when given (an audit's grading of a correct solution, never a student's), gets the lines of
    the submission's file that some test ran, and `arcs`, when given with it, their arcs (each step from a
    line to the next in one call of a function: grader/confined/tracing.py). `mutant_run` (an audit's
    grading of a generated mutant, never a student's: `contract.MutantRun`) shortens the call limit of
    every test but those it names, and may stop at the first catch by a named test."""
    backend_name = backend.name if backend_name is None else backend_name
    started = time.monotonic()
    tier = exercise.tier(tier)  # an unknown tier fails before anything runs
    expected = expected_max(exercise, tier)  # worked out once: the score's ceiling, then the check of the results
    card = new_scorecard(exercise, tier, backend_name, expected)
    try:
        submission = validate(data, exercise.submission_file, exercise.max_submission_bytes)
    except Rejected as why:
        card.submission_sha256 = hashlib.sha256(data).hexdigest()
        card.status, card.reason = "rejected", str(why)
    else:
        card.submission_sha256 = submission.sha256
        # The run is the host's: its nonce authenticates the results, and its seed is the one on the card.
        run = new_run(exercise, submission.source, seed, trace_lines=lines is not None, mutant_run=mutant_run)
        card.seed = run.seed
        judge(card, backend(exercise, submission.source, tier, run), exercise, tier, run.nonce, expected, lines,
              arcs, mutant_run)
        if diagnose is not None:
            card.diagnosis = diagnose(card, exercise)  # on the host, from what the card says alone
    card.graded_at = utc_now()  # when the grading ended
    card.duration_s = round(time.monotonic() - started, 3)
    return card


def new_scorecard(exercise: Exercise, tier: str, backend_name: str,
                  expected: dict[tuple[str, str], int] | None = None) -> Scorecard:
    """A scorecard for this exercise and tier before anything is judged: status graded, score 0, the
    ceiling and the locked tests filled in. Whoever refuses a run before grading starts sets its
    status and reason (the platform bundles do, for a submission of no file or of several)."""
    expected = expected_max(exercise, tier) if expected is None else expected
    return Scorecard(exercise=exercise.slug, tier=tier, submission_sha256="", status="graded", score=0,
                     max_score=sum(expected.values()), title=exercise.title, backend=backend_name,
                     grader_version=grader.__version__,
                     graded_at=utc_now(),
                     suite_labels=exercise.suite_labels, suite_visibility=exercise.suite_visibility,
                     open_suites=exercise.open_suites, submission_file=exercise.submission_file,
                     exercise_fingerprint=exercise_fingerprint(exercise), locked=locked_tests(exercise, tier))


def expected_max(exercise: Exercise, tier: str) -> dict[tuple[str, str], int]:
    """(suite, test name) -> points, for every test the tier runs, as collected from the suites (whose
    names are checked first: an ExerciseError says what to change)."""
    check_tests(exercise)
    return {(suite.name, name): exercise.points_for(name, suite.name)
            for suite in exercise.suites_for(tier) for name in list_tests(suite)}


def locked_tests(exercise: Exercise, tier: str) -> list[LockedTest]:
    run = set(exercise.tiers[tier])
    return [LockedTest(name, suite.name, exercise.points_for(name, suite.name))
            for suite in exercise.suites.values() if suite.name not in run for name in list_tests(suite)]


def judge(card: Scorecard, raw: RawRun, exercise: Exercise, tier: str, nonce: str,
          expected: dict[tuple[str, str], int] | None = None, lines: set[int] | None = None,
          arcs: set[tuple[int, int]] | None = None, mutant_run: MutantRun | None = None) -> None:
    """Fill `card` from a backend's raw run, or mark it `error` with the reason. `nonce` is the one the
    host gave the run: results that do not carry it were not written by this run's harness. `expected`
    is the tier's tests with their points (see `expected_max`), when the caller has it already. `lines`
    gets the lines of the submission's file the tests' records say ran (a traced run's), `arcs` their arcs.
    A `mutant_run` that stops at a catch may leave tests without a result, once a named test caught it."""
    def error(reason: str) -> None:
        card.status, card.reason, card.score, card.tests = "error", valid_text(reason, MESSAGE_CHARS), 0, []

    card.isolation = raw.isolation
    printed = results_from_output(raw.output)
    if printed is None:
        _log_harness_end(raw, exercise, tier)
        if raw.timed_out:
            return error(f"{TIMED_OUT}: its harness stopped answering and was stopped after {exercise.limits.hard_stop_s:g} s")
        return error("the grading harness ended without results" + (f": {raw.detail}" if raw.detail else
                     f" (exit status {raw.exit_status})"))
    try:
        results = Results.from_json(printed)
        if results.nonce != nonce:
            return error("the results file was not written by this run's harness (it may have been forged)")
        records = [TestRecord.from_untrusted(entry, exercise.suites) for entry in results.tests]
        tests = [TestResult.scored(record, exercise.points_for(record.name, record.suite)) for record in records]
        problems = [valid_text(p, MESSAGE_CHARS) for p in results.problems]
    except (ValueError, KeyError, TypeError) as exc:
        return error(f"the harness's results could not be read ({exc})")
    if problems:
        return error("; ".join(problems))
    expected = expected if expected is not None else expected_max(exercise, tier)
    reported = {(t.suite, t.name) for t in tests}
    missing = sorted(f"{suite}::{name}" for suite, name in expected if (suite, name) not in reported)
    stopped = mutant_run is not None and mutant_run.stop_at_catch and any(map(mutant_run.settled, records))
    if missing and not stopped:
        return error(f"no result for {len(missing)} test(s): {', '.join(missing[:5])}")
    card.tests = tests
    if lines is not None:
        lines.update(line for record in records for line in record.lines)
    if arcs is not None:
        arcs.update((a, b) for record in records for a, b in record.arcs)
    card.score = sum(t.score for t in tests)
    card.max_score = sum(t.max_score for t in tests)


def _log_harness_end(raw: RawRun, exercise: Exercise, tier: str) -> None:
    """A harness that ended without results: what it printed last (its traceback, on its own trusted
    side) goes to the grading's log, where whoever runs the grader can see why; the card says only that
    it ended. Cut to its last HARNESS_TAIL_CHARS, made valid text: it is read, never acted on."""
    tail = raw.output.decode("utf-8", errors="replace")[-HARNESS_TAIL_CHARS:].strip()
    log.error("%s (%s tier): the grading harness ended without results (exit status %s%s)%s", exercise.slug, tier,
              raw.exit_status, ", timed out" if raw.timed_out else "",
              f"; it printed last:\n{valid_text(tail, HARNESS_TAIL_CHARS)}" if tail else "; it printed nothing")
