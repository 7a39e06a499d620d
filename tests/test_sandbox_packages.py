"""An exercise declares the Debian packages its sandbox needs: they go into the image and its tag,
and a package Debian does not have is a clear error at `grader image build`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.image import PACKAGES, base_recipe, base_tag, image_tag
from tests.helpers import EXERCISE, PROJECT

COURSE = PROJECT / "tests" / "course"
REFERENCE = COURSE / "solutions" / "tiny_stats" / "stats.py"


def course_with_packages(tmp_path: Path, packages: list[str]) -> Path:
    """A copy of the test course whose exercise needs `packages`, with a warm-up test that imports six."""
    shutil.copytree(COURSE, tmp_path / "course", ignore=shutil.ignore_patterns("__pycache__"))
    folder = tmp_path / "course" / "exercises" / "tiny_stats"
    toml = folder / "exercise.toml"
    toml.write_text(toml.read_text().replace("[limits]", f"[sandbox]\npackages = {packages!r}\n\n[limits]", 1))
    (folder / "checks" / "test_six.py").write_text(
        "def test_the_sandbox_has_six(ns):\n"
        "    import six\n"
        "    assert ns['spread']([1, 4]) == 3 and six.PY3\n")
    return folder


@pytest.mark.unit
def test_packages_are_read_sorted_once_each(tmp_path):
    exercise = load_exercise(str(course_with_packages(tmp_path, ["python3-six", "jq", "python3-six"])))
    assert exercise.packages == ("jq", "python3-six")
    assert load_exercise(EXERCISE).packages == ()


@pytest.mark.unit
def test_the_tags_cover_the_extra_packages_and_nothing_changes_without_them():
    assert base_recipe()["packages"] == sorted(PACKAGES) == base_recipe(())["packages"]
    assert base_tag(()) == base_tag() == base_tag([PACKAGES[0]])  # a package the base has already
    assert base_tag(["jq"]) != base_tag() and base_tag(["jq"]) == base_tag(("jq",))
    assert base_tag(["jq", "python3-six"]) == base_tag(["python3-six", "jq"]) != base_tag(["jq"])
    assert image_tag(extra=["jq"]) != image_tag() == image_tag(extra=())


@pytest.mark.slow
def test_a_package_debian_does_not_have_is_a_clear_error_at_image_build(tmp_path, docker_client, capsys):
    folder = course_with_packages(tmp_path, ["no-such-package-for-grader"])
    assert main(["image", "build", "--exercise", str(folder)]) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "Debian bookworm has no package named no-such-package-for-grader" in err
    assert "[sandbox] packages" in err


@pytest.mark.slow
def test_an_exercise_grades_in_an_image_with_its_packages(tmp_path, docker_client, grading_image):
    from grader.sandbox.docker_backend import DockerBackend

    exercise = load_exercise(str(course_with_packages(tmp_path, ["python3-six"])))
    backend = DockerBackend(docker_client)
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "practice", backend, "docker")
    assert card.status == "graded" and card.score == card.max_score, card.reason or card.tests
    assert "test_the_sandbox_has_six" in {t.name for t in card.tests}
    assert backend.images[("python3-six",)] == image_tag(extra=["python3-six"])
    assert docker_client.images.get(image_tag(extra=["python3-six"]))
