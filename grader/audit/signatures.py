"""What each mutant fails, kept in solutions/SLUG/misconceptions.json, and when that file is current.

A signature is a mutant's failing tests on the exercise's top tier, each with the share of the graded
seeds it failed on (a random workload may fail on some seeds only) and the kinds of failure seen: the
status and the message's first line, which for a scenario names the first call where the mutant parts
ways from the reference, what the reference gave and what the mutant gave, with each scenario's
particulars masked but the call's name kept (grader/core/causes.py's `masked_divergence`). A tier's
signature is the part of it in that tier's suites.

The file carries a fingerprint of what the signatures were graded against (exercise.toml's grading
settings, every suite's files, the reference, the mutants and their hints): a file whose fingerprint is not the
exercise's is stale: every grading names it in its log and on the terminal (`stale_signatures`),
and nothing is diagnosed from it until `grader misconceptions SLUG` writes it again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core.causes import masked_divergence
from grader.core.exercise import Exercise
from grader.core.fingerprint import feed_exercise, files_fingerprint, graded_by
from grader.core.scorecard import TestResult

FILE = "misconceptions.json"
FORMAT = 2  # the file's layout and how its kinds are masked; a change of either makes every file stale


@dataclass
class Failure:
    rate: float  # the share of the graded seeds this test failed on (1.0: every one)
    kinds: list[str] = field(default_factory=list)  # failure_kind of each different failure seen


@dataclass
class Signature:
    mutant: str  # its file name without .py
    hint: str
    fails: dict[str, Failure] = field(default_factory=dict)  # test_key -> how it failed


@dataclass
class Signatures:
    exercise: str
    fingerprint: str
    tier: str  # the tier the mutants were graded on (the top tier)
    seeds: int  # gradings per mutant, each on its own seed
    seeded: list[str] = field(default_factory=list)  # test keys of the random workloads (a `seed` fixture)
    mutants: list[Signature] = field(default_factory=list)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "format": FORMAT, "exercise": self.exercise, "fingerprint": self.fingerprint, "tier": self.tier,
            "seeds": self.seeds, "seeded": self.seeded,
            "mutants": [{"mutant": m.mutant, "hint": m.hint,
                         "fails": {key: {"rate": f.rate, "kinds": f.kinds} for key, f in sorted(m.fails.items())}}
                        for m in self.mutants],
        }
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Signatures:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a misconceptions file of format {FORMAT}")
        mutants = [Signature(m["mutant"], m["hint"], {key: Failure(float(f["rate"]), list(f["kinds"]))
                                                      for key, f in m["fails"].items()})
                   for m in data["mutants"]]
        return cls(data["exercise"], data["fingerprint"], data["tier"], int(data["seeds"]), list(data["seeded"]),
                   mutants)


def test_key(suite: str, name: str) -> str:
    return f"{suite}::{name}"


def failure_kind(test: TestResult) -> str:
    """How a test failed, the scenario's particulars masked: its status and its message's first line (for a
    scenario: the first divergent call, what the reference gave, what the program gave)."""
    return f"{test.status}: {masked_divergence(test.message)}"


def signatures_path(exercise: Exercise) -> Path:
    return exercise.reference.parent / FILE


def _inputs(exercise: Exercise) -> list[Path]:
    return [exercise.folder / "exercise.toml", *graded_by(exercise), *exercise.mutant_sources]


_fingerprints: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


def signatures_fingerprint(exercise: Exercise) -> str:
    """A digest of what the signatures depend on: the exercise as a grading's fingerprint sees it
    (grader/core/fingerprint.py's `feed_exercise`: the same settings, suites and reference, so the two
    never drift) and the mutants, their hints included. Not the code that judges: a new grader release
    leaves what a mutant fails as it was. Read again only when a file's name, size or time changed."""
    paths = _inputs(exercise)
    stat = files_fingerprint(paths)
    known = _fingerprints.get(str(exercise.folder))
    if known is not None and known[0] == stat:
        return known[1]
    digest = hashlib.sha256(f"misconceptions {FORMAT}\0".encode())
    feed_exercise(digest, exercise)
    folder = exercise.reference.parent.relative_to(exercise.root).as_posix() \
        if exercise.reference.parent.is_relative_to(exercise.root) else exercise.slug
    for mutant in exercise.mutants:  # each as the file it is, whether kept whole or as its change
        digest.update(f"{folder}/mutants/{mutant.stem}.py".encode() + b"\0" + mutant.read_bytes() + b"\0")
    _fingerprints[str(exercise.folder)] = (stat, digest.hexdigest()[:16])
    return digest.hexdigest()[:16]


def read_signatures(exercise: Exercise) -> Signatures | None:
    """The exercise's signature file as it is, current or not; None when there is none or it is unreadable."""
    try:
        return Signatures.from_json(signatures_path(exercise).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


_current: dict[str, tuple[tuple[tuple[str, int, int], ...], Signatures | None]] = {}


def current_signatures(exercise: Exercise) -> Signatures | None:
    """The exercise's signatures when the file is there and current (its fingerprint is the exercise's),
    else None: nothing is diagnosed from a stale file."""
    path = signatures_path(exercise)
    stat = files_fingerprint([path, *_inputs(exercise)])
    known = _current.get(str(path))
    if known is not None and known[0] == stat:
        return known[1]
    found = read_signatures(exercise)
    if found is not None and (found.exercise != exercise.slug or found.fingerprint != signatures_fingerprint(exercise)):
        found = None
    _current[str(path)] = (stat, found)
    return found


def signatures_problem(exercise: Exercise) -> str:
    """Why nothing of this exercise can be diagnosed, in words for its author; "" when the file is current
    or the exercise has no mutants to diagnose with."""
    if not exercise.mutant_sources:
        return ""
    if current_signatures(exercise) is not None:
        return ""
    what = "stale (the suites, the reference, exercise.toml or the mutants changed since it was written)" \
        if signatures_path(exercise).is_file() else "missing"
    return (f"{signatures_path(exercise)} is {what}: no misconception is diagnosed until "
            f"`grader misconceptions {exercise.slug}` writes it again")
