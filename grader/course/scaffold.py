"""`grader new SLUG`: a working exercise to start from, laid out as every exercise is.

The skeleton is a small exercise whole: a statement, a stub, a reference, a visible suite, a hidden
suite whose random workload is drawn per submission from the exercise's key, the key itself, and a
first mutant. `grader audit SLUG` finds it strong as written, so an author changes one working thing
at a time rather than guessing at the layout. Every key exercise.toml knows is written out, commented.
"""

from __future__ import annotations

import builtins
import json
import keyword
import secrets
import string
from pathlib import Path

from grader.core.exercise import SLUG, ExerciseError

EXERCISE_TOML = '''\
# The exercise's settings. Every key the grader knows is here; the commented ones show their defaults.
title = "{title}"
# The file name a submission is graded as (students hand in a file of this name; tests import it).
submission = "{module}.py"
# The names of the submission the tests ask for, through the `ns` fixture: ns["{function}"].
names = ["{function}"]
# The tier `grade` and `package` use when none is named (default: the last tier below).
default_tier = "premium"
# The largest submission accepted, in KiB.
# max_submission_kb = 256

[limits]
call_timeout_s = 5       # one call into the submission
import_timeout_s = 5     # importing the submission
test_timeout_s = 60      # one whole test
total_timeout_s = 160    # the whole run: the tests left past it fail as timeouts
# memory_mb = 512        # the worker's address space
# processes = 32         # processes and threads the worker may have
# file_size_mb = 16      # the largest file the worker may write
# open_files = 64
# cpu_s = 60             # CPU seconds of one worker
# cpus = 1.0             # CPUs of the worker in a container
# disk_mb = 64           # the worker's scratch space
# output_kb = 8          # how much of a test's printed output the scorecard keeps
# sockets = false        # network sockets (TCP, UDP; loopback only): refused unless an exercise needs them

# Each suite: a folder of pytest files (relative to the project folder), the label students see, the
# points of each test, whether its tests may use the `reference` fixture (the reference solution,
# never readable by the submission), and whether a failed assert without a message shows its
# expression (details = true) or only that a check failed. visibility: when Gradescope shows its
# results (hidden, after_due_date, after_published, visible).
[suites.visible]
folder = "exercises/{slug}/tests"
label = "Visible tests"
points = 5
reference = false
details = true

[suites.hidden]
folder = "hidden_tests/{slug}"
label = "Premium tests"
points = 2
reference = true
details = false
# visibility = "after_published"

# Each tier is the list of suites it runs; the tests of the others are named on the report, never run.
[tiers]
free = ["visible"]
premium = ["visible", "hidden"]

# Points of single tests, by function name, over their suite's points.
[points]
# test_{function}_of_a_random_list = 3

# Debian packages the grading image needs beyond Python, pytest and pytest-timeout.
# [sandbox]
# packages = ["python3-numpy"]

# "Before you code": a question answered on the exercise's web page before the editor opens.
# [prediction]
# question = "What is {function}([3, 1, 4, 1, 5])?"
# choices = ["[3, 3, 4, 4, 5]", "[3, 1, 4, 1, 5]", "[5, 5, 5, 5, 5]"]
# answer = 1   # counting from 1
# why = "Each entry is the largest value seen so far."
# hides = ["visible_tests"]   # parts of the page that give the answer away (statement, visible_tests)

# The web service: when a premium student may open the reference (never, after_first_graded,
# after_full_marks or a date such as 2026-12-20), and the least time between two submissions.
# Due dates (with their zone): later submissions are marked late; after `closes` none is taken, but
# under a student's extension given on the dashboard.
# [web]
# solution = "after_first_graded"
# submission_interval_s = 30
# due = 2026-12-20T23:59:00+01:00
# closes = 2026-12-22T23:59:00+01:00

# Files students are given besides the stub, in this folder: their code never makes two students look
# alike in `grader similarity`.
# [similarity]
# given = ["helpers.py"]

# `grader audit` grades every mutant (those in solutions/{slug}/mutants/ and those it makes from the
# reference) on this many seeds. A mutant it makes that behaves exactly as the reference does, which no
# test can catch, is declared below by the key the audit prints (here: `>` made `>=` in {function}),
# with the reason.
[audit]
seeds = 3

[audit.equivalent]
{equivalent} = "a value equal to the largest so far is appended either way: the same number"
'''

STATEMENT = '''\
# $title

`grader new $slug` wrote this exercise as a working example to make your own: its task, a running
maximum, is asked for under the exercise's name. Replace this statement, the stub, the reference, the
suites and the mutant with your exercise's, one working thing at a time, and run `grader audit $slug`
after each.

Write `$function(values)`: for a list of numbers, the list of the largest value seen so far at each
position. `$function([3, 1, 4, 1, 5])` is `[3, 3, 4, 4, 5]`; an empty list gives an empty list. The
list passed in is left as it is.
'''

STUB = '''\
"""$title: the statement is in README.md."""


def $function(values: list[float]) -> list[float]:
    raise NotImplementedError("$function() is not implemented yet")
'''

REFERENCE = '''\
"""$title: the reference solution (students never see it; the hidden suite compares with it)."""


def $function(values: list[float]) -> list[float]:
    out: list[float] = []
    for value in values:
        out.append(value if not out or value > out[-1] else out[-1])
    return out
'''

MUTANT = '''\
"""Compares each value with the one before it rather than with the largest so far.

Misconception: compares each value with the one just before it instead of the largest seen so far.
"""


def $function(values: list[float]) -> list[float]:
    return [value if i == 0 else max(value, values[i - 1]) for i, value in enumerate(values)]
'''

VISIBLE = '''\
"""The visible suite: the statement's example, which students may read and run."""


def test_the_example_of_the_statement(ns):
    """$function([3, 1, 4, 1, 5]) is [3, 3, 4, 4, 5]."""
    got = ns["$function"]([3, 1, 4, 1, 5])
    assert list(got) == [3, 3, 4, 4, 5], f"$function([3, 1, 4, 1, 5]) should be [3, 3, 4, 4, 5], got {got!r}"
'''

HIDDEN = '''\
"""The hidden suite: edge cases and a random workload, against the reference.

The workload is drawn from the `seed` fixture: derived from the submission and this exercise's key
(seed.key beside this file), so each submission gets its own and a regrade the same.
"""

import random


def test_an_empty_list_gives_an_empty_list(ns):
    """An empty list has no maxima."""
    got = ns["$function"]([])
    assert list(got) == [], f"$function([]) should be [], got {got!r}"


def test_each_value_is_compared_with_the_largest_so_far(ns):
    """After [1, 3], a 2 is below the largest so far (3), though above the first value (1)."""
    got = ns["$function"]([1, 3, 2])
    assert list(got) == [1, 3, 3], f"$function([1, 3, 2]) should be [1, 3, 3], got {got!r}"


def test_a_value_is_compared_with_the_largest_so_far_not_the_one_before_it(ns):
    """After [3, 1], a 2 is above the value before it (1), though below the largest so far (3)."""
    got = ns["$function"]([3, 1, 2])
    assert list(got) == [3, 3, 3], f"$function([3, 1, 2]) should be [3, 3, 3], got {got!r}"


def test_${function}_of_a_random_list(ns, reference, seed):
    """A random list gives what the reference gives."""
    rng = random.Random(f"$slug-{seed}")
    values = [rng.randint(-100, 100) for _ in range(rng.randint(5, 40))]
    want, got = reference["$function"](list(values)), ns["$function"](list(values))
    assert list(got) == want, f"$function({values}) should be {want}, got {got!r}"
'''


def function_name(slug: str) -> str:
    """The name the skeleton's task goes by: the slug as a Python name, unless that would be a keyword or
    shadow a builtin the skeleton's own code calls (`max`, `list`), or is no name at all (`2sum`)."""
    name = slug.replace("-", "_")
    if name.isidentifier() and not keyword.iskeyword(name) and name not in vars(builtins) and name != "random":
        return name
    return f"exercise_{name}"


def title_of(slug: str) -> str:
    """`running-max` reads `Running max`: the title exercise.toml and the statement start with."""
    words = slug.replace("-", " ").replace("_", " ")
    return words[:1].upper() + words[1:]


def files_of(slug: str, module: str) -> dict[str, str]:
    """The skeleton's files, by their path in the project folder: every one names the exercise (its
    title, its function), so that two skeletons are not the same text."""
    name = slug.replace("-", "_")  # test files are imported as modules by their names
    names = {"slug": slug, "title": title_of(slug), "function": function_name(slug)}

    def fill(template: str) -> str:
        return string.Template(template).substitute(names)

    reference = fill(REFERENCE)
    return {
        f"exercises/{slug}/exercise.toml": EXERCISE_TOML.format(module=module, **names,
                                                                equivalent=_equivalent_key(reference)),
        f"exercises/{slug}/README.md": fill(STATEMENT),
        f"exercises/{slug}/{module}.py": fill(STUB),
        f"exercises/{slug}/tests/test_{name}_visible.py": fill(VISIBLE),
        f"hidden_tests/{slug}/test_{name}_hidden.py": fill(HIDDEN),
        f"hidden_tests/{slug}/seed.key": secrets.token_hex(32) + "\n",
        f"solutions/{slug}/{module}.py": reference,
        f"solutions/{slug}/mutants/01_compares_with_the_previous_value.py": fill(MUTANT),
    }


def _equivalent_key(reference: str) -> str:
    """The key of the one mutant the skeleton's reference gives that no test can catch (`>` made `>=`
    where the largest so far is kept: an equal value is appended either way), quoted for TOML."""
    from grader.audit.mutate import generate_mutants

    found = [m.key for m in generate_mutants(reference) if m.operator == "comparison" and "value >= out[-1]" in m.name]
    if len(found) != 1:  # the skeleton's own reference: a change of it must say which mutant is meant
        raise ExerciseError(f"the skeleton's reference gives {len(found)} mutants `>=` where it keeps the largest")
    return json.dumps(found[0], ensure_ascii=False)


def new_exercise(slug: str, project: Path, module: str = "solution") -> list[Path]:
    """Write the skeleton of exercise `slug` into `project`; returns the files written. Refuses to
    touch an exercise that exists, in part or whole."""
    if not SLUG.fullmatch(slug):
        raise ExerciseError(f"{slug!r}: an exercise's name is lower-case letters, digits, '_' and '-'")
    if not module.isidentifier():
        raise ExerciseError(f"--file {module!r}: the submission's module name must be a Python name")
    if not project.is_dir():
        raise ExerciseError(f"{project}: no such folder")
    taken = [project / top / slug for top in ("exercises", "hidden_tests", "solutions") if (project / top / slug).exists()]
    if taken:
        raise ExerciseError(f"{taken[0]} exists: choose another name, or remove it to start again")
    written = []
    for relative, text in files_of(slug, module).items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    (project / "hidden_tests" / slug / "seed.key").chmod(0o600)  # the key is the instructor's alone
    return written
