"""`pip install .` makes a working grader: the wheel carries the harness and the report templates,
and grades, reports and exports from any folder."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from tests.helpers import PROJECT


@pytest.mark.unit
def test_the_wheel_lists_every_package_of_the_source_tree():
    setuptools = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(PROJECT).parts) for p in (PROJECT / "grader").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert set(setuptools["packages"]) == found | {"grader.templates"}
    assert setuptools["package-dir"] == {"grader.templates": "templates"}
    assert (PROJECT / "templates" / "report.html.j2").is_file()


def run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_a_wheel_grades_and_reports_from_another_folder(tmp_path):
    # Build from a clean copy of what a checkout holds (the build writes build/ and *.egg-info).
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md"):
        source.mkdir(exist_ok=True)
        shutil.copy2(PROJECT / name, source / name)
    for name in ("grader", "templates"):
        shutil.copytree(PROJECT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(source)],
        tmp_path)
    wheel = next((tmp_path / "dist").glob("grader-*.whl"))
    # The dependencies (pytest, Jinja2, rich) come from this interpreter's site-packages, named in a .pth
    # file: `--system-site-packages` would reach the base interpreter's, not a virtual environment's that
    # runs these tests. The folders a .pth names are not scanned for .pth files of their own, so this
    # checkout's editable install stays out.
    run([sys.executable, "-m", "venv", str(tmp_path / "venv")], tmp_path)
    python, grader = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin" / "grader"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).stdout.strip()
    ours = [site.getusersitepackages(), *site.getsitepackages()]
    (Path(purelib) / "the-tests-interpreter.pth").write_text("".join(f"{folder}\n" for folder in ours))
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)], tmp_path)
    shutil.rmtree(source)  # nothing may be read from the build's source any more
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([str(python), "-c", "import grader, grader.report as r; print(grader.__file__); "
                                    "print(r.templates_folder())"], elsewhere).stdout.split()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where
    run([str(grader), "grade", str(PROJECT / "solutions" / "continuous_batching" / "scheduler.py"),
         "--exercise", str(PROJECT / "exercises" / "continuous_batching"), "--tier", "free", "--sandbox", "local",
         "--json", "card.json", "--html", "report.html", "--md", "report.md"], elsewhere)
    card = json.loads((elsewhere / "card.json").read_text())
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0
    page = (elsewhere / "report.html").read_text()
    assert "Visible tests" in page and "Premium tests not run" in page
    assert "Premium tests not run" in (elsewhere / "report.md").read_text()
    exported = run([str(grader), "export", "card.json", "--format", "junit"], elsewhere).stdout
    assert "<testsuites" in exported
    # The platform bundles' scripts ship as package data, and the report templates travel in the bundle.
    run([str(grader), "package", "--target", "gradescope", "--exercise", str(PROJECT / "exercises" / "continuous_batching"),
         "-o", "autograder.zip"], elsewhere)
    with zipfile.ZipFile(elsewhere / "autograder.zip") as bundle:
        assert {"setup.sh", "run_autograder", "grader/templates/report.html.j2"} <= set(bundle.namelist())
