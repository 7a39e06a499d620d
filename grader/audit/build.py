"""The signatures worked out by grading each mutant as a submission (`grader misconceptions SLUG`).

Each mutant is graded on the exercise's top tier `seeds` times, each time on a seed of its own (the
seeds `grader audit` grades it on): a test failing on every seed is part of the mistake, one failing on
some is a random workload that reaches it only sometimes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grader.audit.gradings import kept_card
from grader.audit.signatures import Failure, Signature, Signatures, failure_kind, signatures_fingerprint, test_key
from grader.core.backend import Backend
from grader.core.exercise import Exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.core.seeding import audit_seeds
from grader.diagnosis.hints import mutant_hint

SEEDS = 3


class BuildError(Exception):
    """A mutant the signatures cannot be made from: no hint, or a grading that is not `graded`."""


def seeded_test_keys(cards: list[Scorecard]) -> list[str]:
    """The test keys of the tests whose workloads change with the seed, as the harness found them when it
    graded (the test takes the `seed` fixture, or a fixture of it does): the audit reads the same flag."""
    keys = (test_key(test.suite, test.name) for card in cards for test in card.tests if test.seeded)
    return list(dict.fromkeys(keys))  # in the order the tests ran


def signature_of(name: str, hint: str, cards: list[Scorecard]) -> Signature:
    fails: dict[str, Failure] = {}
    for card in cards:
        for test in card.tests:
            if test.status == "passed":
                continue
            failure = fails.setdefault(test_key(test.suite, test.name), Failure(0.0))
            failure.rate += 1 / len(cards)
            kind = failure_kind(test)
            if kind not in failure.kinds:
                failure.kinds.append(kind)
    for failure in fails.values():
        failure.rate = round(failure.rate, 3)
    return Signature(name, hint, fails)


def _graded(source: bytes, exercise: Exercise, tier: str, backend: Backend, seed: int, keep: bool) -> Scorecard:
    def make() -> Scorecard:
        return grade_bytes(source, exercise, tier, backend, seed=seed)

    return kept_card(make, exercise, source, tier, seed, backend.name) if keep else make()


def build_signatures(exercise: Exercise, backend: Backend, seeds: int = SEEDS,
                     on_mutant: Callable[[Path, Signature], None] | None = None,
                     keep_gradings: bool = False) -> Signatures:
    """Each mutant graded on `seeds` seeds; with `keep_gradings`, a grading `grader audit` kept (the same
    mutant, seed, tier, sandbox and exercise) is read instead of graded again (grader/audit/gradings.py)."""
    tier = exercise.top_tier
    fingerprint = signatures_fingerprint(exercise)  # before grading: what was graded
    found = []
    graded: list[Scorecard] = []
    for path in exercise.mutants:
        hint = mutant_hint(path)
        if not hint:
            raise BuildError(f"{path}: its docstring has no `Misconception:` paragraph (the mistake, in a "
                             "student's words, completing \"your program behaves like one that ...\")")
        source = path.read_bytes()
        cards = [_graded(source, exercise, tier, backend, seed, keep_gradings)
                 for seed in audit_seeds(source, exercise, seeds)]
        for card in cards:
            if card.status != "graded":
                raise BuildError(f"{path}: graded as {card.status}: {card.reason}")
        graded += cards
        signature = signature_of(path.stem, hint, cards)
        found.append(signature)
        if on_mutant is not None:
            on_mutant(path, signature)
    return Signatures(exercise.slug, fingerprint, tier, seeds, seeded_test_keys(graded), found)
