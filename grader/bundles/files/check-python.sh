#!/bin/sh
# The grader needs Python 3.10 or later as /usr/bin/python3 (the sandbox's workers see only /usr), and
# every module a grading imports, at versions that grade. Run once where the platform builds its image,
# so that a base image that cannot grade fails there, loudly, and not on the first student's submission.
#
#   check-python.sh [PROJECT]                check, and say what is wrong and what to change
#   check-python.sh --missing [PROJECT]      the pinned requirements to install (missing or too old), one a line
#   check-python.sh --constraints            every pinned version, the dependencies' too (pip's -c file)
#
# PROJECT is the exercise's project folder: Hypothesis is checked when its suites import it (without a
# PROJECT, as PrairieLearn's image is built before it sees the exercise, it is checked always). What
# the system lacks goes to python-packages/ beside this script, which the runners put on the path first.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
python=/usr/bin/python3
if [ ! -x "$python" ]; then
    echo "grader: there is no $python: install Python 3.10 or later (apt-get install python3)" >&2
    exit 1
fi
# Any Python can run this line, so that an old one is told so rather than failing on newer syntax.
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "grader: $python is $("$python" --version 2>&1); the grader needs Python 3.10 or later:" \
         "choose a base image that has it (Ubuntu 22.04 or later, Debian bookworm or later)" >&2
    exit 1
fi
PYTHONPATH="$here:$here/python-packages" "$python" - "$here" "$@" <<'EOF'
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple


class Needed(NamedTuple):
    """A package a grading imports. `oldest` is the oldest release that grades (found by grading the
    reference and the stub with older ones on Python 3.10; for Hypothesis, which the grader itself does
    not call, the major release suites are written for); `pinned` is what is installed where the
    system's is missing or older."""

    distribution: str
    module: str
    purpose: str
    oldest: str
    why_oldest: str
    pinned: str


NEEDED = [
    Needed("pytest", "pytest", "the harness runs the suites with it", "7.0",
           "the harness keeps its state under pytest.StashKey", "8.3.5"),
    Needed("pytest-timeout", "pytest_timeout", "it bounds every test's time", "2.1",
           "the harness sets each test's timer through its pytest_timeout_set_timer hook", "2.3.1"),
    Needed("Jinja2", "jinja2", "the reports' templates", "3.0",
           "Jinja 2 does not import beside MarkupSafe 2.1 or later", "3.1.6"),
    Needed("rich", "rich", "the command line's output", "10.3", "the command line sets its console's width",
           "13.9.4"),
]
BEFORE_311 = [Needed("tomli", "tomli", "Python 3.10 has no tomllib: exercise.toml is read with tomli", "1.0",
                     "pytest 7 needs it too", "2.2.1")]
HYPOTHESIS = Needed("hypothesis", "hypothesis", "for the suites that import it", "6.0",
                    "suites are written for Hypothesis 6", "6.131.0")

# What those pull in, pinned as well, so that every bundle that installs gets the set that was tested.
DEPENDENCIES = [
    "pluggy==1.5.0", "iniconfig==2.0.0", "packaging==24.2", 'exceptiongroup==1.2.2; python_version < "3.11"',
    "MarkupSafe==3.0.2", "markdown-it-py==3.0.0", "mdurl==0.1.2", "Pygments==2.19.1",
    'typing_extensions==4.12.2; python_version < "3.11"', "attrs==25.3.0", "sortedcontainers==2.4.0",
]
GRADING_IMPORTS = ("grader.bundles.run", "grader.cli", "grader.report.exports", "grader.sandbox.local",
                   "grader.harness.plugin")


def release(version):
    """A version's leading numbers, to compare ("2.0.2" -> (2, 0, 2); "7.2.1-2" -> (7, 2, 1))."""
    found = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(part) for part in found.group().split(".")) if found else ()


def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(distribution, module):
    """The version of `module` an import finds (None: none), from the metadata beside it: a system's
    older copy behind a newer one in python-packages/ does not count."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return None
    for entry in sys.path:
        if entry and spec.origin.startswith(os.path.join(os.path.abspath(entry), "")):
            for found in importlib.metadata.distributions(path=[entry]):
                if normalized(found.metadata["Name"] or "") == normalized(distribution):
                    return found.version
    return "of unknown version"


def wants_hypothesis(project):
    if project is None:
        return True
    pattern = re.compile(rb"^\s*(?:import|from)\s+hypothesis\b", re.M)
    return any(pattern.search(path.read_bytes()) for path in Path(project).rglob("*.py"))


def needed(project):
    rows = list(NEEDED)
    if sys.version_info < (3, 11):
        rows += BEFORE_311
    if wants_hypothesis(project):
        rows.append(HYPOTHESIS)
    return rows


def problem(package):
    """What is wrong with one package (None: nothing)."""
    version = installed(package.distribution, package.module)
    if version is None:
        return f"{package.distribution} is missing ({package.purpose})"
    if release(version) < release(package.oldest):
        return (f"{package.distribution} {version} is too old: the grader needs {package.oldest} or later "
                f"({package.why_oldest})")
    return None


def missing(project):
    return [f"{package.distribution}=={package.pinned}" for package in needed(project) if problem(package)]


def constraints():
    every = [*NEEDED, *BEFORE_311, HYPOTHESIS]
    return [f"{package.distribution}=={package.pinned}" for package in every] + DEPENDENCIES


def check(bundle, project):
    python = f"Python {sys.version.split()[0]}"
    problems = [found for package in needed(project) if (found := problem(package)) is not None]
    if problems:
        for found in problems:
            print(f"grader: {found}", file=sys.stderr)
        print(f"grader: {python} at {sys.executable} cannot grade. install-packages.sh (setup.sh runs it) installs "
              f"the versions the grader pins into {bundle}/python-packages with pip, which needs the network; or install them "
              "for /usr/bin/python3 in the image (apt-get, or pip)", file=sys.stderr)
        return 1
    imported = subprocess.run([sys.executable, "-c", "import " + ", ".join(GRADING_IMPORTS)],
                              capture_output=True, text=True)
    if imported.returncode != 0:
        lines = imported.stderr.strip().splitlines() or [f"exit status {imported.returncode}"]
        print(f"grader: {python} cannot import the grader: {lines[-1]}", file=sys.stderr)
        return 1
    bwrap = shutil.which("bwrap")
    sandbox = (subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip() if bwrap else
               "no bubblewrap: each submission runs as an account of its own")
    print(f"grader: ready ({python}, {sandbox})")
    return 0


def main(bundle, arguments):
    if arguments[:1] == ["--constraints"]:
        print("\n".join(constraints()))
        return 0
    listing = arguments[:1] == ["--missing"]
    rest = arguments[1:] if listing else arguments
    project = rest[0] if rest else None
    if listing:
        for requirement in missing(project):
            print(requirement)
        return 0
    return check(bundle, project)


sys.exit(main(sys.argv[1], sys.argv[2:]))
EOF
