"""What a grading depends on besides the submission, as digests: files told changed from unchanged by
their names, sizes and times; the code that judges; exercise.toml's settings that decide a grade; and an
exercise's fingerprint, which a scorecard carries so that a result graded against another suite or by
another grader is known (`batch` grades it again, the service's dashboard offers a regrade).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from grader.core.exercise import EXERCISE_TOML, SUITE, Exercise
from grader.core.toml_specs import keys_of

# As in grader/core/exercise.py: Python 3.10 has no tomllib, and tomli is the same parser.
if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def files_fingerprint(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """What tells changed files from unchanged ones without reading them: names, sizes, times."""
    found = []
    for path in paths:
        for file in ([path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []):
            stat = file.stat()
            found.append((str(file), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


_fingerprints: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


@functools.cache
def judging_code_digest() -> str:
    """A digest of the code that judges a submission: the harness, which runs the suites, drives the
    workers and turns outcomes into results (its files as this process has them; a version number alone
    stays the same across changes to them)."""
    import grader

    digest = hashlib.sha256(f"grader {grader.__version__}\0".encode())
    harness = Path(grader.__file__).parent / "harness"
    for file in sorted(harness.rglob("*.py")):
        digest.update(file.relative_to(harness).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


# exercise.toml's settings that decide nothing of a grade: the title, the default tier (a scorecard names
# its tier), the question before the editor, the web page's settings (the due and closing dates among
# them), the similarity report's and the audit's; and of each suite, how its results are shown (its label,
# its Gradescope visibility), not what they are.
NOT_GRADING = keys_of(EXERCISE_TOML, grading=False)  # title, default_tier, prediction, web, similarity, audit
SUITE_NOT_GRADING = keys_of(SUITE, grading=False)  # label, visibility


def grading_settings(toml: Path) -> bytes:
    """exercise.toml's settings that decide a grade (the submission's name and names, its size limit, the
    limits, the suites, tiers, points and sandbox packages), in one canonical form: a comment, the order of
    the keys or an edit of a setting in NOT_GRADING leaves it the same."""
    try:
        config = tomllib.loads(toml.read_text(encoding="utf-8"))
    except OSError:
        return b""
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return toml.read_bytes()  # the exercise cannot load as it is: any change of it counts
    kept = {key: value for key, value in config.items() if key not in NOT_GRADING}
    suites = kept.get("suites")
    if isinstance(suites, dict):
        kept["suites"] = {name: {key: value for key, value in table.items() if key not in SUITE_NOT_GRADING}
                          if isinstance(table, dict) else table for name, table in suites.items()}
    return json.dumps(kept, sort_keys=True, default=str).encode()


def feed_exercise(digest: Any, exercise: Exercise, also: list[Path] | None = None) -> None:
    """Feed `digest` what a grading of the exercise depends on besides the code that judges: exercise.toml's
    grading settings (`grading_settings`: never its dates or its page's text), every suite's files and the
    reference, then the files of `also`. The one computation behind `exercise_fingerprint` and the
    misconception signatures' (grader/audit/signatures.py), so the two never disagree on what counts."""
    digest.update(b"exercise.toml\0" + grading_settings(exercise.folder / "exercise.toml") + b"\0")
    for path in [*graded_by(exercise), *(also or [])]:
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts and not file.name.endswith(".pyc"):
                name = file.relative_to(exercise.root) if file.is_relative_to(exercise.root) else file
                digest.update(name.as_posix().encode() + b"\0" + file.read_bytes() + b"\0")


def graded_by(exercise: Exercise) -> list[Path]:
    """The files a grading reads besides the submission and exercise.toml: the suites and the reference."""
    return [*(suite.path for suite in exercise.suites.values()), exercise.reference]


def exercise_fingerprint(exercise: Exercise) -> str:
    """A digest of everything a grading of this exercise depends on besides the submission: the code that
    judges (`judging_code_digest`) and the exercise's files (`feed_exercise`). A result with another
    fingerprint was graded against another suite or by another grader (`batch` grades such results again,
    the service's dashboard offers a regrade). Read again only when a file's name, size or time changed."""
    toml = exercise.folder / "exercise.toml"
    stat = files_fingerprint([toml, *graded_by(exercise)])
    known = _fingerprints.get(str(toml))
    if known is not None and known[0] == stat:
        return known[1]
    digest = hashlib.sha256(f"{judging_code_digest()}\0".encode())
    feed_exercise(digest, exercise)
    _fingerprints[str(toml)] = (stat, digest.hexdigest()[:16])
    return digest.hexdigest()[:16]
