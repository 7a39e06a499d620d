"""One grading of each mutant on each seed, shared by `grader audit` and `grader misconceptions`.

Both grade an author's mutant on the exercise's top tier on the audit's seeds; the second of them reads
what the first kept. A grading is kept in the grader's cache (grader/disk_cache.py) under a digest of
everything its result depends on: the exercise's fingerprint (the code that judges, exercise.toml's
grading settings, the suites, the reference), the tier, the seed, the sandbox's name and the mutant's
bytes (and a generated mutant's `MutantRun`: its calls' limit and where it stops). Only a `graded` result is kept: an error (a sandbox that could not start, a machine too busy)
is graded again next time, never remembered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict

from grader.core.exercise import Exercise
from grader.core.fingerprint import exercise_fingerprint
from grader.core.scorecard import Scorecard
from grader.disk_cache import keep, read_cached
from grader.harness.contract import MutantRun

FOLDER = "mutant-gradings"


def grading_key(exercise: Exercise, data: bytes, tier: str, seed: int | None, backend_name: str,
                mutant_run: MutantRun | None = None) -> str:
    parts = [exercise.slug, exercise_fingerprint(exercise), tier, str(seed), backend_name,
             hashlib.sha256(data).hexdigest()]
    if mutant_run is not None:  # a generated mutant's run: its limit and its stop are part of what it says
        parts.append(json.dumps(asdict(mutant_run)))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def cached_card(exercise: Exercise, data: bytes, tier: str, seed: int | None, backend_name: str,
                mutant_run: MutantRun | None = None) -> Scorecard | None:
    kept = read_cached(f"{FOLDER}/{grading_key(exercise, data, tier, seed, backend_name, mutant_run)}.json")
    if kept is None:
        return None
    try:
        card = Scorecard.from_dict(json.loads(kept))
    except (ValueError, TypeError, KeyError):
        return None  # a file of an older layout, or cut short: graded again
    return card if card.status == "graded" else None


def kept_card(make: Callable[[], Scorecard], exercise: Exercise, data: bytes, tier: str, seed: int | None,
              backend_name: str, mutant_run: MutantRun | None = None) -> Scorecard:
    """The grading `make` does, read from the cache when this very grading was kept before; kept when graded."""
    found = cached_card(exercise, data, tier, seed, backend_name, mutant_run)
    if found is not None:
        return found
    card = make()
    if card.status == "graded":
        keep(f"{FOLDER}/{grading_key(exercise, data, tier, seed, backend_name, mutant_run)}.json",
             card.to_json(compact=True).encode())
    return card
