"""The tests of an exercise's suites, as pytest collects them on the host from the exercise's own
(trusted) files, kept on disk by the suites' content; and the checks only the collected tests allow.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import subprocess
import sys

from grader.core.exercise import Exercise, ExerciseError, SuiteSpec
from grader.core.fingerprint import files_fingerprint
from grader.disk_cache import keep, read_cached
from grader.harness.contract import collection_error

_listed: dict[str, tuple[tuple[tuple[str, int, int], ...], tuple[str, ...]]] = {}


def list_tests(suite: SuiteSpec) -> list[str]:
    """The tests of a suite as the scorecard names them: pytest's id without the file (`test_x[case]` for
    each parametrized case, `TestClass::test_x` for a test in a class)."""
    return [test_id.split("::", 1)[1] for test_id in list_test_ids(suite)]


def list_test_ids(suite: SuiteSpec) -> list[str]:
    """The tests of a suite as pytest names them from the suite's folder (`test_file.py::test_x`).

    pytest collects them on the host, from the exercise's own (trusted) files: it imports the suite,
    never a submission. Used to name the premium tests a free run did not run, to state the points at
    stake when a submission is refused, and to check that every test of a run reported a result. A
    process lists an unchanged suite once (its files' names, sizes and times tell); a new process finds
    the list on disk by the suite's content.
    """
    fingerprint = files_fingerprint([suite.path])
    known = _listed.get(str(suite.path))
    if known is not None and known[0] == fingerprint:
        return list(known[1])
    digest = hashlib.sha256(b"test ids\0")
    for path in sorted(suite.path.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(suite.path).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    ids = _collect(str(suite.path), digest.hexdigest())
    _listed[str(suite.path)] = (fingerprint, ids)
    return list(ids)


def check_tests(exercise: Exercise) -> None:
    """What only the collected tests show: every test's name is its own across the exercise's suites (the
    scorecard, the gradebook's columns, the list of locked tests and [points] know a test by its name),
    and every [points] entry names a test. An ExerciseError says what to change."""
    where: dict[str, str] = {}
    for suite in exercise.suites.values():
        for test_id in list_test_ids(suite):
            file, name = test_id.split("::", 1)
            place = str(suite.path / file)
            if name in where:
                raise ExerciseError(f"{exercise.folder / 'exercise.toml'}: two tests are named {name}, in {where[name]} "
                                    f"and {place}; a test is known by its name (scorecards, gradebooks, [points]), "
                                    "so rename one")
            where[name] = place
    bases = {name.split("[", 1)[0] for name in where}
    for key in exercise.points:
        if key not in bases:
            near = difflib.get_close_matches(key, sorted(bases), n=1)
            hint = f"did you mean {near[0]}?" if near else "no test has that name"
            raise ExerciseError(f"{exercise.folder / 'exercise.toml'}: [points] {key} names no test of the exercise "
                                f"({hint})")


def _collection_errors(output: str) -> str:
    """Each file pytest could not collect, with its error's own lines (`contract.collection_error`)."""
    sections = re.split(r"^_+ ERROR collecting (.+?) _+$", output.split("= short test summary info =")[0], flags=re.M)
    found = [f"{name}: {collection_error(body)}" for name, body in zip(sections[1::2], sections[2::2])]
    return "\n".join(found) if found else output[-2000:]


@functools.lru_cache(maxsize=64)
def _collect(folder: str, digest: str) -> tuple[str, ...]:
    """pytest's collection of `folder`, kept on disk by the suite's content (a collection costs a whole
    pytest start), so that every grading of an unchanged suite reuses it."""
    cache = f"tests-{digest}.json"
    kept = read_cached(cache)
    try:
        names = json.loads(kept) if kept is not None else None
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return tuple(names)
    except ValueError:
        pass
    # The path this process found pytest on (a platform bundle's own folder of packages, say), as the harness gets.
    path = os.pathsep.join(entry for entry in sys.path[1:] if entry)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", folder, "--confcutdir", folder, folder],  # no conftest.py from the folders around it
        capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    if done.returncode not in (0, 5):
        raise ExerciseError(f"the suite in {folder} cannot be collected:\n{_collection_errors(done.stdout)}")
    found = tuple(line for line in done.stdout.splitlines() if "::" in line)
    keep(cache, json.dumps(list(found)).encode())
    return found
