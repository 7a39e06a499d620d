"""`pip install grader` grades, reports and exports; the Docker sandbox, the store, the web service and
the queue are extras, and a command that needs one that is missing names the extra to install.

Each case runs the CLI in a fresh interpreter where the extras' packages cannot be imported (a finder
first on `sys.meta_path` refuses them), as after `pip install grader` alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import EXERCISE, PROJECT, REFERENCE

EXTRAS_PACKAGES = ("docker", "requests", "sqlalchemy", "alembic", "starlette", "uvicorn", "multipart",
                   "python_multipart", "redis", "rq", "psycopg")

WITHOUT_EXTRAS = f"""
import sys
from importlib.abc import MetaPathFinder

class Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {EXTRAS_PACKAGES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Absent())
from grader.cli import main
sys.exit(main(sys.argv[1:]))
"""


def grader_without_extras(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)})


def test_the_core_install_grades_reports_and_exports(tmp_path):
    done = grader_without_extras("grade", str(REFERENCE), "--exercise", EXERCISE, "--json", "card.json",
                                 "--md", "report.md", "--html", "report.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # `auto` finds no Docker SDK and says so, then grades on the local sandbox.
    assert "grader[docker]" in done.stdout + done.stderr
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0 and card["backend"] == "local"
    assert (tmp_path / "report.html").read_text().count("<html") == 1
    exported = grader_without_extras("export", "card.json", "--format", "gradescope", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["score"] == card["score"]


@pytest.mark.parametrize(("argv", "extra"), [
    (("grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "docker"), "docker"),
    (("batch", str(PROJECT / "solutions" / EXERCISE), "--exercise", EXERCISE, "--sandbox", "local"), "service"),
    (("serve", "--db", "grader.db"), "service"),
], ids=["docker sandbox", "batch", "serve"])
def test_a_command_that_needs_an_extra_names_it(argv, extra, tmp_path):
    done = grader_without_extras(*argv, cwd=tmp_path)
    assert done.returncode != 0
    assert f"pip install 'grader[{extra}]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_similarity_on_a_class_folder_needs_no_extra(tmp_path):
    """`grader similarity FOLDER` reads files, not a store: it runs on the core install, and writes its
    owner-only report, where it once imported SQLAlchemy through the store."""
    folder = PROJECT / "tests" / "similarity_class"
    done = grader_without_extras("similarity", str(folder), "--exercise", EXERCISE, "--json", "report.json",
                                 "--out", "pages", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["pairs"] and (tmp_path / "pages").is_dir()
    assert "grader[" not in done.stdout + done.stderr
