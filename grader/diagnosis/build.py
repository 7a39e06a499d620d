"""The signatures worked out by grading each mutant as a submission (`grader misconceptions SLUG`).

Each mutant is graded on the exercise's top tier `seeds` times, each time on a seed of its own (the
file with a comment line added, so its hash and so its seed differ): a test failing on every seed is
part of the mistake, one failing on some is a random workload that reaches it only sometimes.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from grader.diagnosis.hints import mutant_hint
from grader.diagnosis.signatures import Failure, Signature, Signatures, failure_kind, signatures_fingerprint, test_key
from grader.exercise import Exercise, list_tests
from grader.grading import Backend, grade_bytes
from grader.scorecard import Scorecard

SEEDS = 3


class BuildError(Exception):
    """A mutant the signatures cannot be made from: no hint, or a grading that is not `graded`."""


def seed_variant(source: bytes, index: int) -> bytes:
    """The mutant as graded the `index`th time: itself first, then with a comment that changes its seed."""
    return source if index == 0 else source.rstrip(b"\n") + f"\n# seed variant {index}\n".encode()


def seeded_tests(exercise: Exercise) -> list[str]:
    """The test keys of the tests that take the `seed` fixture: their workloads change with the seed."""
    keys = []
    for suite in exercise.suites.values():
        takes_seed = set()
        for file in sorted(suite.path.rglob("test_*.py")):
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        any(arg.arg == "seed" for arg in node.args.args):
                    takes_seed.add(node.name)
        keys += [test_key(suite.name, name) for name in list_tests(suite)
                 if name.split("[", 1)[0].split("::")[-1] in takes_seed]
    return keys


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


def build_signatures(exercise: Exercise, backend: Backend, seeds: int = SEEDS,
                     on_mutant: Callable[[Path, Signature], None] | None = None) -> Signatures:
    tier = exercise.top_tier
    fingerprint = signatures_fingerprint(exercise)  # before grading: what was graded
    found = []
    for path in exercise.mutants:
        hint = mutant_hint(path)
        if not hint:
            raise BuildError(f"{path}: its docstring has no `Misconception:` paragraph (the mistake, in a "
                             "student's words, completing \"your program behaves like one that ...\")")
        source = path.read_bytes()
        cards = [grade_bytes(seed_variant(source, index), exercise, tier, backend) for index in range(seeds)]
        for card in cards:
            if card.status != "graded":
                raise BuildError(f"{path}: graded as {card.status}: {card.reason}")
        signature = signature_of(path.stem, hint, cards)
        found.append(signature)
        if on_mutant is not None:
            on_mutant(path, signature)
    return Signatures(exercise.slug, fingerprint, tier, seeds, seeded_tests(exercise), found)
