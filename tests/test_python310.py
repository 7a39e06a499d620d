"""The code a platform bundle runs in the platform's container works on Python 3.10 (Ubuntu 22.04's,
Gradescope's default base image): `grader grade` with its harness and workers, and `grader export`,
with the packages the bundle's install-packages.sh puts beside it (check-python.sh's pinned versions,
installed with pip into a folder of their own). The other host commands (serve, batch, publish) need
Python 3.11.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import PROJECT, REFERENCE
from tests.platform_images import install_packages, python310

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def py310(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """A Python 3.10, and the environment that gives it the grader and the bundle's pinned packages."""
    interpreter = python310()
    if interpreter is None:
        pytest.skip("no Python 3.10 on this machine")
    folder = tmp_path_factory.mktemp("python310-packages")
    try:
        install_packages(interpreter, folder / "site")
    except subprocess.CalledProcessError as failed:
        pytest.skip(f"pip could not install the bundle's packages for Python 3.10: {failed.stderr[-500:]}")
    # As a bundle runs it: the grader's source and its own folder of packages, nothing of this Python's.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": f"{folder / 'site'}{os.pathsep}{PROJECT}",
           "PYTHONNOUSERSITE": "1", "LANG": "C.UTF-8"}
    version = subprocess.run([interpreter, "-c", "import sys; print(sys.version_info[:2])"], env=env,
                             capture_output=True, text=True, check=True).stdout
    assert version.strip() == "(3, 10)"
    return interpreter, env


def grade(py310: tuple[str, dict[str, str]], source: Path, card: Path, *options: str) -> dict:
    interpreter, env = py310
    done = subprocess.run([interpreter, "-m", "grader", "grade", str(source), "--exercise", "continuous_batching",
                           "--sandbox", "local", "--json", str(card), *options], env=env, cwd=PROJECT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(card.read_text())


def test_python310_grades_the_reference_in_full_and_exports_it_for_both_platforms(py310, tmp_path):
    card = grade(py310, REFERENCE, tmp_path / "card.json", "--tier", "premium")
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0, card.get("reason")
    interpreter, env = py310
    for platform in ("gradescope", "prairielearn"):
        out = tmp_path / f"{platform}.json"
        done = subprocess.run([interpreter, "-m", "grader.cli", "export", str(tmp_path / "card.json"),
                               "--format", platform, "-o", str(out)], env=env, cwd=PROJECT,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        results = json.loads(out.read_text())
        assert results["score"] == (card["score"] if platform == "gradescope" else 1)


def test_python310_rejects_a_syntax_error_with_its_line(py310, tmp_path):
    broken = tmp_path / "scheduler.py"
    broken.write_text("class Scheduler:\n    def schedule(self)\n        return []\n")
    card = grade(py310, broken, tmp_path / "card.json")
    assert card["status"] == "rejected" and "line 2" in card["reason"], card["reason"]
