"""The seed of a grading run: what a suite's random workloads are drawn from.

It is derived from the submission's SHA-256 and a key the student never sees, so that

- each submission gets its own workloads: a failing random workload shows its expected plans, and
  collecting them across resubmissions gains nothing, because any change to the file draws others;
- the same file graded again gets the same seed, so a regrade reproduces the run exactly; the
  scorecard records the seed as well, to say which run it was.

The key is the file `seed.key` beside the exercise's premium suite (`hidden_tests/<slug>/seed.key`),
which students never see; any text will do, and changing it draws new workloads for everyone. The
environment variable GRADER_SEED_KEY overrides it (a course can keep its key out of the repository).
Without either, the seed depends on the submission alone: still reproducible, but predictable by
someone who has the suite.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from grader.core.exercise import Exercise

KEY_FILE = "seed.key"
SEED_BITS = 63  # a non-negative int that JSON, SQLite and every language's integers hold exactly


def seed_key(exercise: Exercise) -> bytes:
    override = os.environ.get("GRADER_SEED_KEY")
    if override:
        return override.encode()
    path = exercise.root / "hidden_tests" / exercise.slug / KEY_FILE
    try:
        return path.read_bytes().strip()
    except OSError:
        return b""


def derive_seed(submission_sha256: str, exercise: Exercise) -> int:
    """HMAC-SHA256(key, exercise slug + submission hash), cut to SEED_BITS bits."""
    message = f"{exercise.slug}\0{submission_sha256}".encode()
    digest = hmac.new(seed_key(exercise), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def seed_for_source(source: bytes, exercise: Exercise) -> int:
    return derive_seed(hashlib.sha256(source).hexdigest(), exercise)


def audit_seeds(source: bytes, exercise: Exercise, count: int) -> list[int]:
    """The seeds `audit` grades a mutant on: the one it would get as a submission, then others drawn
    the same way (from the key, the exercise and the file), so a rerun grades the same workloads."""
    sha = hashlib.sha256(source).hexdigest()
    return [derive_seed(sha if k == 0 else f"{sha}:{k}", exercise) for k in range(count)]
