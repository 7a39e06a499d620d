"""`grader package`: the bundles, and each one run end to end as its platform runs it.

The platforms' own images come from registries this project does not reach, so root file systems
stand in for them: Debian bookworm (the grading image's base, grader/sandbox/image.py, mmdebstrap and
`docker import`) with the packages a bundle installs, built once and kept by its tag, and the same with Python 3.10
as /usr/bin/python3, standing in for Ubuntu 22.04 (tests/platform_images.py). Every container is started by
grader/bundles/trial.py as the platform starts it, with Docker's default confinement (no security
options, no added capabilities, never privileged): Gradescope's autograder image is the zip unpacked
to /autograder/source with setup.sh run as root, committed; each submission runs run_autograder in a
fresh container (network on, 768 MB, half a CPU). PrairieLearn's grading image is built from the
question's image/ recipe, and each submission runs the entrypoint with one folder bound at /grade, as
its grader host does.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grader.bundles import HOST_PACKAGES, gradescope_zip, packages_for, prairielearn_folder
from grader.bundles.trial import GRADESCOPE, PRAIRIELEARN, GradescopeAutograder, PrairieLearnGrader
from grader.bundles.trial_outcome import Outcome
from grader.core.exercise import load_exercise
from tests.helpers import ATTACKS, EXERCISE, PROJECT, REFERENCE, STUB

SYNTAX_ERROR = b"class Scheduler:\n    def schedule(self)\n        return []\n"
# Gradescope's documented results.json fields (specs: top level, and each test).
GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
# PrairieLearn's documented external grading results.json fields.
PRAIRIELEARN_TOP = {"succeeded", "gradable", "score", "max_points", "message", "output", "format_errors", "tests", "images",
                    "provenance"}  # the documented fields, and provenance (PrairieLearn keeps the whole object)
PRAIRIELEARN_TEST = {"name", "description", "points", "max_points", "message", "output", "images"}
QUESTION_SCHEMA = Path(__file__).resolve().parent / "schemas" / "prairielearn-infoQuestion.json"
# What a student may read of a run the grader could not vouch for: never the grader's own account of it.
STAFF_ONLY = ("--security-opt", "bubblewrap", "CAP_SETUID", "its log ends", "zygote")
# The attacks run through each bundle: premium material hunted (on the premium tier, where the hidden
# suite and the reference are in the container), the network tried, every process killed, the process
# table filled (on the free tier: a fork bomb makes each test run out its time, and the premium tier's
# many tests would take minutes at half a CPU).
# Memory held outside the address space (Gradescope's container is 768 MB) and CPU credit earned on
# purpose by the submission's own spinners, on the free tier too.
ATTACKS_RUN = {"read_secrets": "premium", "network": "free", "kill_everything": "free", "fork_bomb": "free",
               "memory_outside_address_space": "free", "credit_gaming": "free"}


# -- the bundles themselves (no engine needed) ------------------------------------------------------

@pytest.fixture(scope="module")
def exercise():
    return load_exercise(EXERCISE)


def exercise_copy(root: Path, total_timeout_s: int):
    """The exercise in a project of its own (`root`), with this total_timeout_s."""
    for folder in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(PROJECT / folder / EXERCISE, root / folder / EXERCISE,
                        ignore=shutil.ignore_patterns("__pycache__", "mutants"))
    toml = root / "exercises" / EXERCISE / "exercise.toml"
    text, count = re.subn(r"(?m)^total_timeout_s = \d+", f"total_timeout_s = {total_timeout_s}", toml.read_text())
    assert count == 1
    toml.write_text(text)
    return load_exercise(str(root / "exercises" / EXERCISE))


@pytest.fixture(scope="module")
def quick_exercise(tmp_path_factory):
    """The exercise with a shorter total_timeout_s: a job that runs out its time ends sooner."""
    return exercise_copy(tmp_path_factory.mktemp("quick-project"), 120)


def deprecated_keys(document: Any, schema: dict, root: dict, where: str = "") -> list[str]:
    """The keys of `document` that `schema` marks deprecated (jsonschema validates, but allows them)."""
    while "$ref" in schema or ("allOf" in schema and len(schema["allOf"]) == 1):
        schema = root["definitions"][schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema["allOf"][0]
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            inner = schema.get("properties", {}).get(key, {})
            if inner.get("deprecated"):
                found.append(f"{where}{key}")
            found += deprecated_keys(value, inner, root, f"{where}{key}.")
    return found


@pytest.mark.unit
def test_the_gradescope_zip_has_the_two_scripts_at_its_root_and_carries_the_grader_and_the_exercise(exercise):
    with zipfile.ZipFile(io.BytesIO(gradescope_zip(exercise, "premium", None))) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 & 0o777 for info in archive.infolist()}
        config = json.loads(archive.read("bundle.json"))
        packages = archive.read("packages.txt").decode().split()
    assert {"setup.sh", "run_autograder"} <= names and modes["run_autograder"] & 0o111
    assert {"grader/cli/__init__.py", "grader/cli/__main__.py", "grader/bundles/run.py", "grader/confined/worker.py",
            "grader/templates/report.html.j2",
            "project/exercises/continuous_batching/exercise.toml", "project/hidden_tests/continuous_batching/seed.key",
            "project/solutions/continuous_batching/scheduler.py"} <= names
    assert not any("/mutants/" in name or "__pycache__" in name for name in names)
    assert config["exercise"] == EXERCISE and config["tier"] == "premium" and config["submission"] == "scheduler.py"
    assert set(HOST_PACKAGES) <= set(packages) and "bubblewrap" in packages


@pytest.mark.unit
def test_both_bundles_carry_one_runner_and_one_exercise_project_each_where_its_platform_looks(quick_exercise, tmp_path):
    """The files that install and run the grader, and the exercise it grades, are made in one place
    (grader/bundles/contents.py) for both platforms: Gradescope's at the zip's root, PrairieLearn's
    runner in image/ (with the course's packages) and its exercise in tests/."""
    from grader.bundles.contents import exercise_members, runner_members
    from grader.bundles.prairielearn import course_packages

    with zipfile.ZipFile(io.BytesIO(gradescope_zip(quick_exercise, "free", "visible"))) as archive:
        zipped = {info.filename: (archive.read(info), info.external_attr >> 16 & 0o777) for info in archive.infolist()}
    for path, data, mode in [*runner_members(packages_for(quick_exercise)),
                             *exercise_members("gradescope", quick_exercise, "free", "visible")]:
        assert zipped[path] == (data, mode), path
    prairielearn_folder(quick_exercise, "free", tmp_path, "someone/grader:1")
    for folder, members in (("image", runner_members(course_packages(quick_exercise))),
                            ("tests", exercise_members("prairielearn", quick_exercise, "free", None))):
        for path, data, mode in members:
            written = tmp_path / folder / path
            assert written.read_bytes() == data and written.stat().st_mode & 0o777 == mode, written
    assert "check-python.sh" in zipped and (tmp_path / "image" / "install-packages.sh").stat().st_mode & 0o111


@pytest.mark.unit
def test_the_prairielearn_question_is_valid_for_prairielearn_and_keeps_its_uuid(quick_exercise, tmp_path):
    import jsonschema

    prairielearn_folder(quick_exercise, "free", tmp_path, "someone/grader:1")
    info = json.loads((tmp_path / "info.json").read_text())
    schema = json.loads(QUESTION_SCHEMA.read_text())
    jsonschema.validate(info, schema)
    assert deprecated_keys(info, schema, schema) == []
    options = info["externalGradingOptions"]
    assert info["type"] == "v3" and info["gradingMethod"] == "External" and uuid.UUID(info["uuid"])
    # The timeout covers the grader's own last resort (hard_stop_s) and the container's start, within 600 s.
    assert options == {"image": "someone/grader:1", "entrypoint": "/opt/grader/entrypoint",
                       "timeout": int(quick_exercise.limits.hard_stop_s) + 60, "enableNetworking": False}
    assert options["timeout"] <= 600
    html = (tmp_path / "question.html").read_text()
    assert 'file-name="scheduler.py"' in html and "<pl-external-grader-results>" in html
    assert (tmp_path / "starter_scheduler.py").read_bytes() == STUB.read_bytes()
    assert (tmp_path / "tests" / "project" / "hidden_tests" / EXERCISE / "seed.key").is_file()
    # The free tier's suites never use the reference, but the exercise does not load without it.
    assert (tmp_path / "tests" / "project" / "solutions" / EXERCISE / "scheduler.py").is_file()
    assert (tmp_path / "image" / "Dockerfile").read_text().startswith("#")
    first = info["uuid"]
    prairielearn_folder(quick_exercise, "free", tmp_path, "someone/grader:1")
    assert json.loads((tmp_path / "info.json").read_text())["uuid"] == first


@pytest.mark.unit
def test_the_schema_check_would_see_a_deprecated_key():
    schema = json.loads(QUESTION_SCHEMA.read_text())
    info = {"externalGradingOptions": {"enabled": True, "image": "a/b:1"}}
    assert deprecated_keys(info, schema, schema) == ["externalGradingOptions.enabled"]


@pytest.mark.unit
def test_prairielearn_refuses_limits_its_timeout_cannot_cover_and_says_what_to_lower(exercise, tmp_path, capsys):
    from grader.cli import main

    assert exercise.limits.hard_stop_s + 60 <= 600  # the project's own exercises fit
    longer = exercise_copy(tmp_path / "project", 600)
    assert main(["package", "--target", "prairielearn", "--exercise", str(longer.root / "exercises" / EXERCISE), "--image", "someone/grader:1",
                 "-o", str(tmp_path / "q")]) == 2
    said = capsys.readouterr().err
    assert "at most 600 s" in said and "Lower total_timeout_s to 160 or less" in said and "exercise.toml" in said
    assert not (tmp_path / "q" / "info.json").exists()


@pytest.mark.unit
def test_prairielearn_needs_the_image_name_it_will_pull(quick_exercise, tmp_path, capsys):
    from grader.cli import main

    folder = str(quick_exercise.folder)
    assert main(["package", "--target", "prairielearn", "--exercise", folder, "-o", str(tmp_path / "q")]) == 2
    assert "--image ACCOUNT/NAME:TAG" in capsys.readouterr().err
    assert main(["package", "--target", "prairielearn", "--exercise", folder, "--image", "someone/grader:1",
                 "-o", str(tmp_path / "q")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "docker build --platform linux/amd64 -t someone/grader:1" in said and "docker push someone/grader:1" in said
    assert "Sync page" in said


@pytest.mark.unit
def test_the_gradescope_message_names_the_base_image_and_the_timeout_and_asks_for_no_namespaces(tmp_path, capsys):
    from grader.cli import main

    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "-o", str(tmp_path / "a.zip")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "Ubuntu 22.04 or 24.04" in said and "at least 10 minutes" in said  # Gradescope's default covers 160 s
    longer = exercise_copy(tmp_path / "project", 600)  # 3 x 600 + 60 s, and a minute to start: 32 minutes
    assert main(["package", "--target", "gradescope", "--exercise", str(longer.root / "exercises" / EXERCISE), "-o",
                 str(tmp_path / "b.zip")]) == 0
    assert "at least 32 minutes" in " ".join(capsys.readouterr().out.split())
    assert "must allow" not in said and "namespaces" not in said and "--security-opt" not in said


@pytest.mark.unit
def test_the_package_command_refuses_options_of_the_other_platform(tmp_path, capsys):
    from grader.cli import main

    code = main(["package", "--target", "prairielearn", "--exercise", EXERCISE, "--hidden-visibility", "hidden",
                 "-o", str(tmp_path / "q")])
    assert code == 2 and "Gradescope setting" in capsys.readouterr().err
    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "--image", "x",
                 "-o", str(tmp_path / "a.zip")]) == 2
    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "--base", "x",
                 "-o", str(tmp_path / "a.zip")]) == 2
    assert "give --run SUBMISSION too" in capsys.readouterr().err


@pytest.mark.unit
def test_a_submitted_link_is_refused_even_alone_and_dotfiles_do_not_count(tmp_path):
    from grader.bundles.run import refusal, submitted_files

    folder = tmp_path / "submission"
    (folder / "__MACOSX").mkdir(parents=True)
    (folder / "__MACOSX" / "._scheduler.py").write_bytes(b"junk")
    (folder / ".DS_Store").write_bytes(b"junk")
    (folder / "scheduler.py").symlink_to(REFERENCE)
    files = submitted_files(folder)
    assert files == [folder / "scheduler.py"]
    assert refusal(files, folder, "scheduler.py") == "scheduler.py is a link, not a file: submit your scheduler.py itself"
    (folder / "scheduler.py").unlink()
    (folder / "scheduler.py").write_bytes(b"x = 1\n")
    assert refusal(submitted_files(folder), folder, "scheduler.py") is None


def test_grading_and_exporting_load_only_what_the_bundles_install():
    """The platform's container has Debian's pytest, Jinja and rich, not SQLAlchemy or the Docker SDK."""
    code = ("import sys, grader.cli, grader.report.exports, grader.bundles.run, grader.sandbox.local, grader.report\n"
            "print(sorted({'sqlalchemy', 'alembic', 'docker', 'requests', 'starlette'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.strip() == "[]"


@pytest.mark.unit
def test_the_chosen_visibility_travels_in_the_bundle_to_the_export_command(exercise):
    from grader.bundles.run import PLATFORMS, export_command

    with zipfile.ZipFile(io.BytesIO(gradescope_zip(exercise, "premium", "hidden"))) as archive:
        config = json.loads(archive.read("bundle.json"))
    command = export_command(Path("card.json"), PLATFORMS["gradescope"], config["hidden_visibility"])
    assert command[-2:] == ["--hidden-visibility", "hidden"] and "/autograder/results/results.json" in command
    assert "--hidden-visibility" not in export_command(Path("card.json"), PLATFORMS["gradescope"], None)


@pytest.mark.unit
def test_packaging_states_the_point_total_to_set_on_the_gradescope_assignment(tmp_path, capsys):
    from grader.cli import main
    from grader.core.grading import expected_max

    for slug in ("continuous_batching", "paged_kv_cache"):
        for tier in ("free", "premium"):
            exercise = load_exercise(slug)
            total = sum(expected_max(exercise, tier).values())
            zip_path = tmp_path / f"{slug}-{tier}.zip"
            assert main(["package", "--target", "gradescope", "--exercise", slug, "--tier", tier, "-o", str(zip_path)]) == 0
            said = " ".join(capsys.readouterr().out.split())
            assert f"Set the assignment's total points to {total}." in said
            with zipfile.ZipFile(zip_path) as archive:
                readme = archive.read("README.md").decode()
            assert f"Total points: **{total}**" in readme and "at least 10 minutes" in readme


@pytest.mark.unit
def test_hidden_tests_hold_the_total_back_and_packaging_says_so(exercise, tmp_path, capsys):
    from grader.cli import main
    from grader.core.grading import expected_max

    points = expected_max(exercise, "premium")
    held = sum(p for (suite, _), p in points.items() if suite not in exercise.open_suites)
    total = sum(points.values())
    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "--hidden-visibility", "hidden",
                 "-o", str(tmp_path / "a.zip")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"warning: tests worth {held} of {total} points are never shown to students" in said
    assert "top-level visibility hidden" in said and "--hidden-visibility after_due_date or after_published" in said
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert "top-level visibility hidden" in archive.read("README.md").decode()
    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "--hidden-visibility",
                 "after_published", "-o", str(tmp_path / "b.zip")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "warning" not in said and f"tests worth {held} of {total} points are shown once the grades are published" in said
    assert "top-level visibility after_published" in said


@pytest.mark.unit
def test_the_prairielearn_question_shows_the_statement_itself(quick_exercise, tmp_path):
    readme = quick_exercise.folder / "README.md"
    original = readme.read_text()
    readme.write_text(original + "\nA dict such as {{ params.x }} or {a: 1}, and <script>alert(1)</script>.\n")
    try:
        prairielearn_folder(quick_exercise, "free", tmp_path, "someone/grader:1")
    finally:
        readme.write_text(original)
    html = (tmp_path / "question.html").read_text()
    title = original.splitlines()[0].removeprefix("# ")
    assert f"<h1>{title}</h1>" in html and "<code>schedule()</code>" in html
    assert "client_files_question_url" not in html and 'target="_blank"' not in html
    assert not (tmp_path / "clientFilesQuestion").exists()
    # Nothing of the statement is read by PrairieLearn's Mustache, nor is any markup of its own kept.
    assert "&#123;&#123; params.x &#125;&#125;" in html and "<script>" not in html
    assert html.count("{{") == html.count("}}") == 0


@pytest.mark.unit
def test_one_grading_image_serves_every_exercise_of_the_course(tmp_path, capsys):
    from grader.bundles import course_packages
    from grader.cli import main

    folders = {}
    for slug in ("continuous_batching", "paged_kv_cache"):
        folders[slug] = tmp_path / slug
        assert main(["package", "--target", "prairielearn", "--exercise", slug, "--image", "course/grader:1",
                     "-o", str(folders[slug])]) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert "serves every exercise of this project" in said and "warning" not in said
        assert "docker build --platform linux/amd64 -t course/grader:1" in said and "docker push course/grader:1" in said
        assert "sync course/grader:1" in said
        assert json.loads((folders[slug] / "info.json").read_text())["externalGradingOptions"]["image"] == "course/grader:1"

    def recipe(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "image").rglob("*")) if p.is_file()}

    assert recipe(folders["continuous_batching"]) == recipe(folders["paged_kv_cache"])  # one image, built once
    packages = (folders["paged_kv_cache"] / "image" / "packages.txt").read_text().split()
    every = {pkg for slug in folders for pkg in load_exercise(slug).packages}
    assert set(HOST_PACKAGES) | every <= set(packages) == set(course_packages(load_exercise(EXERCISE)))
    # The name suggested, and a name that says one exercise, both say that one image is for the course.
    assert main(["package", "--target", "prairielearn", "--exercise", EXERCISE, "-o", str(tmp_path / "q")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert EXERCISE not in err.split("--image", 2)[-1].split(")")[0] and "same --image" in err
    assert main(["package", "--target", "prairielearn", "--exercise", EXERCISE, "--image", f"me/{EXERCISE}-grader:1",
                 "-o", str(tmp_path / "q")]) == 0
    assert "one image grades every exercise of the course" in " ".join(capsys.readouterr().out.split())


def offline_tools(folder: Path) -> dict[str, str]:
    """A PATH on which no package is installed and apt-get fails as it does without a network."""
    folder.mkdir()
    (folder / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    (folder / "apt-get").write_text("#!/bin/sh\necho \"E: Failed to fetch http://deb.debian.org/debian: "
                                    "Temporary failure resolving 'deb.debian.org'\" >&2\nexit 100\n")
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


def test_an_offline_setup_says_what_it_needed_and_how_to_pre_install_it_then_fails(tmp_path):
    from grader.bundles import FILES

    listing = tmp_path / "packages.txt"
    listing.write_text("bubblewrap\npython3-pytest\n")
    done = subprocess.run(["sh", str(FILES / "install-packages.sh"), str(listing)], capture_output=True, text=True,
                          env=offline_tools(tmp_path / "bin"), timeout=60)
    assert done.returncode != 0
    said = " ".join(done.stderr.split())
    assert "Failed to fetch" in said  # apt's own error is kept, and explained
    assert "could not install the Debian/Ubuntu packages the grader needs: bubblewrap python3-pytest" in said
    assert "needs the network" in said
    assert "RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap python3-pytest" in said


class EngineWithout:
    """A Docker client whose engine has no image and cannot pull one (offline, or a name no registry has)."""

    def __init__(self) -> None:
        import docker

        class Images:
            def get(self, name: str) -> None:
                raise docker.errors.ImageNotFound(f"404 Client Error: Not Found (no such image: {name})")

            def pull(self, name: str) -> None:
                raise docker.errors.APIError(f"500 Server Error: Get https://registry-1.docker.io/v2/: dial tcp: lookup "
                                             f"registry-1.docker.io: no such host ({name})")

        self.images = Images()


@pytest.mark.unit
@pytest.mark.parametrize("target, base, image", [("gradescope", None, "gradescope/autograder-base:ubuntu-22.04"),
                                                 ("prairielearn", None, "debian:bookworm-slim"),
                                                 ("gradescope", "mine/ubuntu:22.04", "mine/ubuntu:22.04")])
def test_a_missing_platform_image_is_named_with_the_command_that_gets_it(tmp_path, target, base, image):
    from grader.bundles.try_bundle import MissingImage, try_bundle

    said: list[str] = []
    with pytest.raises(MissingImage) as refused:
        try_bundle(EngineWithout(), target, tmp_path / "bundle", REFERENCE, tmp_path / "out", base, said.append)
    message = str(refused.value)
    assert f"--run builds on {image}" in message and f"docker pull {image}" in message and "--base IMAGE" in message
    assert "no such host" in message and said == [f"{image} is not on this Docker engine: pulling it"]


class FakeRunner:
    """A built image that grades without an engine: counts its builds, answers each submission with the
    results a platform would read."""

    builds = 0

    def __init__(self, target: str) -> None:
        self.target, self.graded = target, []

    def __enter__(self) -> FakeRunner:
        FakeRunner.builds += 1
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def grade(self, submission: Path, folder: Path) -> Outcome:
        self.graded.append(submission.name)
        full = submission.name.startswith("ref")
        if self.target == "gradescope":
            results = {"score": 88 if full else 0, "extra_data": {"max_score": 88, "status": "graded",
                                                                  "isolation": "account"}, "tests": []}
        else:
            results = {"score": 1.0 if full else 0.0, "gradable": True,
                       "provenance": {"status": "graded", "isolation": "account"}}
        return Outcome(self.target, 0, "", folder, results)


@pytest.mark.unit
@pytest.mark.parametrize("target", ["gradescope", "prairielearn"])
def test_run_each_builds_the_image_once_and_prints_a_score_line_per_submission(tmp_path, monkeypatch, capsys, target):
    from grader.bundles import try_bundle
    from grader.cli import main
    from grader.sandbox import engine

    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "ref.py").write_bytes(REFERENCE.read_bytes())
    (folder / "stub.py").write_bytes(STUB.read_bytes())
    (folder / "bob").mkdir()  # a folder is one student's upload
    (folder / "bob" / "scheduler.py").write_bytes(STUB.read_bytes())
    (folder / ".DS_Store").write_bytes(b"junk")
    runners: list[FakeRunner] = []

    class Client:
        def close(self) -> None:
            pass

    monkeypatch.setattr(engine, "engine_status", lambda: (Client(), ""))
    monkeypatch.setattr(try_bundle, "ensure_base", lambda client, target, base, say: base or "some/base:1")
    monkeypatch.setattr(try_bundle, "make_runner", lambda client, target, output, base: runners.append(FakeRunner(target))
                        or runners[-1])
    FakeRunner.builds = 0
    options = (["--image", "course/grader:1", "-o", str(tmp_path / "q")] if target == "prairielearn"
               else ["-o", str(tmp_path / "a.zip")])
    assert main(["package", "--target", target, "--exercise", EXERCISE, *options, "--run-each", str(folder)]) == 0
    said = capsys.readouterr().out
    assert FakeRunner.builds == 1 and runners[0].graded == ["bob", "ref.py", "stub.py"]
    full, zero = (("88/88 points", "0/88 points") if target == "gradescope" else ("100%", "0%"))
    assert f"ref.py: {full}, graded, isolation account" in said and f"stub.py: {zero}, graded" in said
    assert "3 submissions graded with one image" in said
    assert main(["package", "--target", target, "--exercise", EXERCISE, *options, "--run", str(REFERENCE),
                 "--run-each", str(folder)]) == 2


# -- the runner inside the platform's container, on this machine's files (no engine needed) ------------

def local_platform(tmp_path: Path, exercise, target: str, files: dict[str, bytes]):
    """A platform's folders in `tmp_path`, holding the bundle as it is unpacked there."""
    from grader.bundles import CONFIG, config_for, exercise_files
    from grader.bundles.run import Platform

    platform = Platform(target, tmp_path / "bundle", tmp_path / "submission", tmp_path / "results" / "results.json",
                        target, "the log")
    for path, data in [(CONFIG, config_for(target, exercise, "premium", None).to_json().encode()),
                       *exercise_files(exercise)]:
        (platform.bundle / path).parent.mkdir(parents=True, exist_ok=True)
        (platform.bundle / path).write_bytes(data)
    platform.submission.mkdir()
    for name, data in files.items():
        (platform.submission / name).write_bytes(data)
    return platform


@pytest.mark.parametrize("target", ["gradescope", "prairielearn"])
def test_an_error_tells_the_student_to_submit_again_and_the_staff_why(exercise, tmp_path, monkeypatch, capsys, target):
    from grader.bundles import run as runner

    why = ("the local sandbox cannot isolate untrusted code in this container: bubblewrap could not make "
           "namespaces, and root may not run a process as another account here: the container lacks CAP_SETUID; "
           "its log ends:\nzygote: boom. Run with --security-opt seccomp=unconfined")
    monkeypatch.setattr(runner, "sandbox_problem", lambda: why)
    platform = local_platform(tmp_path, exercise, target, {"scheduler.py": REFERENCE.read_bytes()})
    assert runner.run(platform) == 0  # results were written: PrairieLearn reads them only after exit 0
    log = capsys.readouterr().out
    assert "CAP_SETUID" in log and "zygote: boom" in log and "--security-opt" in log
    results = json.loads(platform.results.read_text())
    student = json.dumps(results)
    assert not [word for word in STAFF_ONLY if word in student]
    sha = results["extra_data" if target == "gradescope" else "provenance"]["submission_sha256"]
    assert re.fullmatch(r"[0-9a-f]{64}", sha) and sha in student
    if target == "gradescope":
        assert results["score"] == 0 and results["extra_data"]["status"] == "error"
        assert "could not produce a result" in results["output"] and "Submit again" in results["output"]
        assert not any(t.get("status") == "passed" or "score" in t for t in results["tests"])
    else:
        assert results["succeeded"] is False and results["score"] == 0 and results["tests"] == []
        assert results["gradable"] is False  # no 0 recorded, no attempt used
        assert "could not produce a result" in results["message"]


def test_a_rejection_is_said_in_the_log_and_names_a_submission_id(exercise, tmp_path, capsys):
    from grader.bundles import run as runner

    platform = local_platform(tmp_path, exercise, "prairielearn", {"a.py": b"x = 1\n", "b.py": b"y = 2\n"})
    assert runner.run(platform) == 0
    log = capsys.readouterr().out
    results = json.loads(platform.results.read_text())
    assert results["gradable"] is False and "submit only your scheduler.py" in " ".join(results["format_errors"])
    assert "rejected: 2 files were submitted" in log
    assert re.fullmatch(r"[0-9a-f]{64}", results["provenance"]["submission_sha256"])



def test_a_syntax_error_is_rejected_with_its_line_even_where_the_sandbox_cannot_start(exercise, tmp_path, monkeypatch):
    """The file is checked before the sandbox: no container's settings turn a syntax error into an error."""
    from grader.bundles import run as runner

    monkeypatch.setattr(runner, "sandbox_problem", lambda: "the container lacks CAP_SETUID")
    platform = local_platform(tmp_path, exercise, "gradescope", {"scheduler.py": SYNTAX_ERROR})
    assert runner.run(platform) == 0
    results = json.loads(platform.results.read_text())
    assert results["extra_data"]["status"] == "rejected" and results["score"] == 0
    assert "line 2" in results["output"] and "CAP_SETUID" not in results["output"]


# -- the platforms, stood in for by containers started with Docker's defaults ------------------------

@pytest.fixture(scope="module")
def platform_base(docker_client, exercise) -> str:
    """A Debian bookworm image with what the bundles install (bootstrapped once, kept by its tag)."""
    from grader.sandbox.image import ensure_base

    return ensure_base(docker_client, extra=packages_for(exercise))


@pytest.fixture(scope="module")
def python310_base(docker_client, platform_base) -> str:
    """The Debian stand-in with Python 3.10 as /usr/bin/python3, as Ubuntu 22.04 has it (platform_images)."""
    from tests.platform_images import ensure_python310_base

    tag = ensure_python310_base(docker_client, platform_base)
    if tag is None:
        pytest.skip("no Python 3.10 on this machine to stand in for Ubuntu 22.04's")
    return tag


# Each bundle runs on each stand-in: Debian bookworm's Python 3.11, and Ubuntu 22.04's Python 3.10.
@pytest.fixture(scope="module", params=["platform_base", "python310_base"], ids=["python3.11", "python3.10"])
def base(request) -> str:
    return request.getfixturevalue(request.param)


def submission(base: Path, **files: bytes) -> Path:
    """A submission folder of these files, in `base` (beside the results of its run)."""
    folder = base / "submission"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def gradescope(docker_client, base, exercise):
    with GradescopeAutograder(docker_client, gradescope_zip(exercise, "premium", None), base) as autograder:
        yield autograder


@pytest.fixture(scope="module")
def gradescope_free(docker_client, base, exercise):
    with GradescopeAutograder(docker_client, gradescope_zip(exercise, "free", None), base) as autograder:
        yield autograder


def gradescope_run(autograder: GradescopeAutograder, tmp_path: Path, files: dict[str, bytes], **options: Any) -> Outcome:
    outcome = autograder.grade(submission(tmp_path, **files), tmp_path / "out", **options)
    assert outcome.exit_status == 0 and outcome.results is not None, (outcome.failure, outcome.log[-3000:])
    document = outcome.results
    assert set(document) <= GRADESCOPE_TOP, set(document) - GRADESCOPE_TOP
    assert isinstance(document["score"], (int, float)) and document["stdout_visibility"] == "hidden"
    for test in document["tests"]:
        assert set(test) <= GRADESCOPE_TEST and test.get("status", "passed") in ("passed", "failed")
        assert test.get("visibility", "visible") in VISIBILITIES
    return outcome


def prairielearn_grader(client, base: str, exercise, tier: str, folder: Path) -> PrairieLearnGrader:
    """The question folder, and its grading image built from its own recipe on the stand-in."""
    prairielearn_folder(exercise, tier, folder, "someone/grader:1")
    return PrairieLearnGrader(client, folder, base)


@pytest.fixture(scope="module")
def prairielearn(docker_client, base, quick_exercise, tmp_path_factory):
    with prairielearn_grader(docker_client, base, quick_exercise, "premium", tmp_path_factory.mktemp("pl")) as grading:
        yield grading


@pytest.fixture(scope="module")
def prairielearn_free(docker_client, base, quick_exercise, tmp_path_factory):
    with prairielearn_grader(docker_client, base, quick_exercise, "free", tmp_path_factory.mktemp("pl-free")) as grading:
        yield grading


def prairielearn_run(grading: PrairieLearnGrader, tmp_path: Path, files: dict[str, bytes], **options: Any) -> Outcome:
    outcome = grading.grade(submission(tmp_path, **files), tmp_path / "out", **options)
    # Every outcome, graded, rejected or errored, exits 0: PrairieLearn reads results.json only then.
    assert outcome.exit_status == 0 and outcome.results is not None, (outcome.failure, outcome.log[-3000:])
    document = outcome.results
    assert set(document) <= PRAIRIELEARN_TOP, set(document) - PRAIRIELEARN_TOP
    assert isinstance(document["gradable"], bool) and 0 <= document["score"] <= 1
    assert all(set(test) <= PRAIRIELEARN_TEST for test in document.get("tests", []))
    return outcome


def secrets(exercise) -> set[str]:
    """What no result may contain: distinctive lines of the hidden suite and the reference, the seed key."""
    from tests.test_attacks import secret_lines

    key = (exercise.root / "hidden_tests" / exercise.slug / "seed.key").read_text().strip()
    return {*secret_lines(), key}


def leaks(outcome: Outcome, exercise) -> list[str]:
    text = json.dumps(outcome.results) + outcome.log
    return [line for line in secrets(exercise) if line in text]


@pytest.mark.slow
def test_gradescope_setup_installs_nothing_where_every_package_is_there(gradescope):
    assert "every package the grader needs is installed" in gradescope.setup_log


@pytest.mark.slow
def test_gradescope_gives_the_reference_full_marks(gradescope, base, python310_base, tmp_path):
    outcome = gradescope_run(gradescope, tmp_path, {"scheduler.py": REFERENCE.read_bytes()})
    results = outcome.results
    assert results["extra_data"]["status"] == "graded"
    # Graded by the stand-in's own /usr/bin/python3, in the isolation Docker's defaults leave.
    assert f"Python {'3.10' if base == python310_base else '3.11'}" in outcome.log, outcome.log[-2000:]
    assert "isolation account" in outcome.log and results["extra_data"]["isolation"] == "account"
    assert results["score"] == results["extra_data"]["max_score"] == sum(t["max_score"] for t in results["tests"]) > 0
    assert all(t["status"] == "passed" for t in results["tests"]) and len(results["tests"]) > 20


@pytest.mark.slow
def test_gradescope_gives_the_stub_under_another_name_zero(gradescope, tmp_path):
    results = gradescope_run(gradescope, tmp_path, {"scheduler (2).py": STUB.read_bytes()}).results
    assert results["extra_data"]["status"] == "graded" and results["score"] == 0
    assert results["tests"] and all(t["status"] == "failed" for t in results["tests"])


@pytest.mark.slow
def test_gradescope_rejects_a_syntax_error_with_its_line(gradescope, tmp_path):
    results = gradescope_run(gradescope, tmp_path, {"scheduler.py": SYNTAX_ERROR}).results
    assert results["extra_data"]["status"] == "rejected" and results["score"] == 0
    assert "line 2" in results["output"] and "syntax" in results["output"].lower()


@pytest.mark.slow
@pytest.mark.parametrize("files", [{}, {"scheduler.py": b"x = 1\n", "helper.py": b"y = 2\n"}], ids=["none", "two"])
def test_gradescope_rejects_no_file_or_two_files_saying_what_it_expects(gradescope, tmp_path, files):
    outcome = gradescope_run(gradescope, tmp_path, files)
    results = outcome.results
    assert results["extra_data"]["status"] == "rejected" and results["score"] == 0
    assert ("submit only your scheduler.py" if files else "no file was submitted") in results["output"]
    assert all(t["status"] == "failed" for t in results["tests"])
    assert re.fullmatch(r"[0-9a-f]{64}", results["extra_data"]["submission_sha256"])
    assert "rejected: " in outcome.log  # the staff's log says it too


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS_RUN)
def test_gradescope_scores_an_attack_zero_and_leaks_nothing(request, base, exercise, tmp_path, attack):
    autograder = request.getfixturevalue("gradescope" if ATTACKS_RUN[attack] == "premium" else "gradescope_free")
    outcome = gradescope_run(autograder, tmp_path, {"scheduler.py": (ATTACKS / f"{attack}.py").read_bytes()})
    assert outcome.results["score"] == 0
    assert outcome.results["extra_data"]["status"] in ("graded", "rejected"), outcome.log[-3000:]
    assert "NETWORK-REACHED" not in json.dumps(outcome.results)
    assert leaks(outcome, exercise) == []


@pytest.mark.slow
def test_gradescope_where_the_sandbox_cannot_start_scores_zero_and_the_staff_read_why(gradescope, tmp_path):
    # A narrower container than Gradescope's (no CAP_SETUID): neither namespaces nor accounts are possible.
    outcome = gradescope_run(gradescope, tmp_path, {"scheduler.py": REFERENCE.read_bytes()},
                             container=replace(GRADESCOPE, cap_drop=("SETUID",)))
    results = outcome.results
    assert results["extra_data"]["status"] == "error" and results["score"] == 0
    assert "could not produce a result" in results["output"] and not any(t["status"] == "passed" for t in results["tests"])
    assert not [word for word in STAFF_ONLY if word in json.dumps(results)]
    assert "the autograder could not run" in outcome.log and "CAP_SETUID" in outcome.log
    assert (outcome.folder / "stdout").read_text() == outcome.log
    # A file that cannot be graded anywhere is rejected with its reason there too: it is checked first.
    broken = gradescope_run(gradescope, tmp_path / "broken", {"scheduler.py": SYNTAX_ERROR},
                            container=replace(GRADESCOPE, cap_drop=("SETUID",)))
    assert broken.results["extra_data"]["status"] == "rejected" and "line 2" in broken.results["output"]


@pytest.mark.slow
def test_gradescope_shows_the_premium_suite_when_the_instructor_chose(docker_client, platform_base, exercise, tmp_path):
    bundle = gradescope_zip(exercise, "premium", "after_due_date")
    with GradescopeAutograder(docker_client, bundle, platform_base) as autograder:
        results = gradescope_run(autograder, tmp_path, {"scheduler.py": REFERENCE.read_bytes()}).results
    by_suite = {t["tags"][0]: t.get("visibility", "visible") for t in results["tests"]}
    assert by_suite["hidden"] == "after_due_date" and by_suite["visible"] == "visible"


@pytest.mark.slow
def test_prairielearn_gives_the_reference_full_marks_and_the_stub_zero(prairielearn, tmp_path):
    full = prairielearn_run(prairielearn, tmp_path / "r", {"scheduler.py": REFERENCE.read_bytes()}).results
    assert full["gradable"] is True and full["succeeded"] is True and full["score"] == 1
    assert full["provenance"]["isolation"] in ("account", "namespaces")
    assert all(t["points"] == t["max_points"] > 0 for t in full["tests"]) and len(full["tests"]) > 20
    zero = prairielearn_run(prairielearn, tmp_path / "s", {"scheduler.py": STUB.read_bytes()}).results
    assert zero["gradable"] is True and zero["score"] == 0 and all(t["points"] == 0 for t in zero["tests"])


@pytest.mark.slow
def test_prairielearn_marks_a_syntax_error_and_two_files_not_gradable_with_the_reason(prairielearn, tmp_path):
    broken = prairielearn_run(prairielearn, tmp_path / "e", {"scheduler.py": SYNTAX_ERROR})
    assert broken.results["gradable"] is False and "line 2" in " ".join(broken.results["format_errors"])
    assert "rejected: " in broken.log and "line 2" in broken.log  # in the job's log too
    two = prairielearn_run(prairielearn, tmp_path / "t", {"scheduler.py": REFERENCE.read_bytes(), "notes.py": b"x = 1\n"})
    assert two.results["gradable"] is False and "submit only your scheduler.py" in " ".join(two.results["format_errors"])
    none = prairielearn_run(prairielearn, tmp_path / "n", {})
    assert none.results["gradable"] is False and "no file was submitted" in " ".join(none.results["format_errors"])


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS_RUN)
def test_prairielearn_scores_an_attack_zero_and_leaks_nothing(request, base, quick_exercise, tmp_path, attack):
    grading = request.getfixturevalue("prairielearn" if ATTACKS_RUN[attack] == "premium" else "prairielearn_free")
    outcome = prairielearn_run(grading, tmp_path, {"scheduler.py": (ATTACKS / f"{attack}.py").read_bytes()})
    assert outcome.results["score"] == 0 and outcome.results["succeeded"] is True
    assert "NETWORK-REACHED" not in json.dumps(outcome.results)
    assert leaks(outcome, quick_exercise) == []


@pytest.mark.slow
def test_prairielearn_where_the_sandbox_cannot_start_the_job_reads_a_failure_and_the_log_why(prairielearn, tmp_path):
    narrower = replace(PRAIRIELEARN, cap_drop=("SETUID",))  # a narrower container than PrairieLearn's
    outcome = prairielearn_run(prairielearn, tmp_path, {"scheduler.py": REFERENCE.read_bytes()}, container=narrower)
    results = outcome.results
    assert results["succeeded"] is False and results["gradable"] is False and results["score"] == 0
    assert not results.get("tests") and "could not produce a result" in results["message"]
    assert not [word for word in STAFF_ONLY if word in json.dumps(results)]
    assert "the autograder could not run" in outcome.log and "CAP_SETUID" in outcome.log


@contextlib.contextmanager
def gradings_on_the_host(private_project) -> Iterator[list[str]]:
    """Hostile gradings on this machine, one after another until the block ends, in namespaces and as an
    account of its own: they kill whatever they can, fill the process table and keep the CPUs busy. The
    outcomes, each "graded" with a score of 0 (checked at the end)."""
    from grader.core.grading import grade_bytes
    from grader.sandbox.local import LocalBackend

    backends = [LocalBackend()] + ([LocalBackend(isolation="account")] if os.geteuid() == 0 else [])
    exercise_here = load_exercise(str(private_project / "exercises" / EXERCISE))
    attacks = [(ATTACKS / f"{name}.py").read_bytes() for name in ("kill_everything", "fork_bomb", "credit_gaming")]
    outcomes: list[str] = []
    stop = threading.Event()

    def grade_beside() -> None:
        turn = 0
        while not stop.is_set():
            card = grade_bytes(attacks[turn % len(attacks)], exercise_here, "free", backends[turn % len(backends)], "local")
            outcomes.append(f"{card.status} {card.score}")
            turn += 1

    thread = threading.Thread(target=grade_beside, daemon=True)
    thread.start()
    try:
        yield outcomes
    finally:
        stop.set()
        thread.join(timeout=300)
    assert outcomes and set(outcomes) == {"graded 0"}, outcomes


@pytest.mark.slow
def test_both_bundles_grade_side_by_side_at_half_a_cpu_and_768_mb(gradescope, prairielearn, private_project, tmp_path):
    """Two gradings at once, each with Gradescope's resources, again and again, while hostile gradings run
    on the machine itself: neither loses a point to the other or to them, and none ends in `error`."""
    reference = {"scheduler.py": REFERENCE.read_bytes()}
    outcomes: dict[str, list[Outcome]] = {"gradescope": [], "prairielearn": []}

    def grade(name: str, run, grading, container) -> None:
        for turn in range(3):
            outcomes[name].append(run(grading, tmp_path / f"{name}-{turn}", reference, container=container))

    with gradings_on_the_host(private_project):
        threads = [threading.Thread(target=grade, args=("gradescope", gradescope_run, gradescope,
                                                        GRADESCOPE.at(0.5, 768))),
                   threading.Thread(target=grade, args=("prairielearn", prairielearn_run, prairielearn,
                                                        PRAIRIELEARN.at(0.5, 768)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [len(runs) for runs in outcomes.values()] == [3, 3]  # each thread's assertions held
    for scored in (outcome.results for outcome in outcomes["gradescope"]):
        assert scored["extra_data"]["status"] == "graded" and scored["score"] == scored["extra_data"]["max_score"]
    assert [outcome.results["score"] for outcome in outcomes["prairielearn"]] == [1, 1, 1]


# A container too small for the grader itself (the kernel ends its processes for want of memory).
TOO_SMALL_MB = 24


@pytest.mark.slow
def test_a_gradescope_runner_the_kernel_ends_still_leaves_a_zero_that_says_to_submit_again(gradescope, tmp_path):
    outcome = gradescope_run(gradescope, tmp_path, {"scheduler.py": REFERENCE.read_bytes()},
                             container=GRADESCOPE.at(0.5, TOO_SMALL_MB))
    results = outcome.results
    assert results["score"] == 0 and "submit it again" in results["output"], (results, outcome.log[-2000:])
    assert "without writing results" in outcome.log or "could not run" in outcome.log
    assert results.get("extra_data", {}).get("status", "error") == "error"
    assert not any(t.get("status") == "passed" for t in results["tests"])


@pytest.mark.slow
def test_a_prairielearn_runner_the_kernel_ends_still_leaves_a_result_that_is_not_gradable(prairielearn, tmp_path):
    outcome = prairielearn_run(prairielearn, tmp_path, {"scheduler.py": REFERENCE.read_bytes()},
                               container=PRAIRIELEARN.at(0.5, TOO_SMALL_MB))
    results = outcome.results
    assert results["gradable"] is False and results["score"] == 0 and not results.get("tests"), outcome.log[-2000:]


# -- `grader package --run`, through the command line ---------------------------------------------------

def trial_images(client) -> set[str]:
    return {tag for image in client.images.list() for tag in image.tags if tag.startswith("grader-trial-")}


def ran(said: str) -> Path:
    found = re.search(r"results\.json: (\S+results\.json)", said)
    assert found, said
    return Path(found.group(1))


@pytest.mark.slow
def test_package_run_shows_what_gradescope_will_show(docker_client, platform_base, tmp_path, capsys):
    from grader.cli import main

    before = trial_images(docker_client)
    code = main(["package", "--target", "gradescope", "--exercise", EXERCISE, "-o", str(tmp_path / "a.zip"),
                 "--run", str(REFERENCE), "--base", platform_base])
    said = capsys.readouterr().out
    results_file = ran(said)
    try:
        assert code == 0, said
        results = json.loads(results_file.read_text())
        assert results["score"] == results["extra_data"]["max_score"] > 0
        assert f"Gradescope: {results['score']} of {results['score']} points, run graded" in said
        assert (results_file.parent / "stdout").is_file()
    finally:
        shutil.rmtree(results_file.parent)
    assert trial_images(docker_client) == before


@pytest.mark.slow
def test_package_run_each_grades_a_folder_with_one_image(docker_client, platform_base, tmp_path, capsys):
    from grader.cli import main

    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "alice.py").write_bytes(REFERENCE.read_bytes())
    (folder / "bob.py").write_bytes(STUB.read_bytes())
    before = trial_images(docker_client)
    code = main(["package", "--target", "gradescope", "--exercise", EXERCISE, "-o", str(tmp_path / "a.zip"),
                 "--run-each", str(folder), "--base", platform_base])
    said = capsys.readouterr().out
    assert code == 0, said
    assert said.count("building the autograder's image") == 1 and "2 submissions graded with one image" in said
    total = re.search(r"total points to (\d+)", said).group(1)
    assert f"alice.py: {total}/{total} points, graded, isolation account" in said
    assert f"bob.py: 0/{total} points, graded" in said
    shutil.rmtree(re.search(r"results under (\S+):", said).group(1))
    assert trial_images(docker_client) == before


@pytest.mark.slow
def test_package_run_shows_what_prairielearn_will_show(docker_client, platform_base, quick_exercise, tmp_path, capsys):
    from grader.cli import main

    upload = submission(tmp_path, **{"scheduler.py": SYNTAX_ERROR})  # a folder, as a student's upload
    before = trial_images(docker_client)
    code = main(["package", "--target", "prairielearn", "--exercise", str(quick_exercise.folder), "--image",
                 "someone/grader:1", "-o", str(tmp_path / "q"), "--run", str(upload), "--base", platform_base])
    said = capsys.readouterr().out
    results_file = ran(said)
    try:
        assert code == 0, said
        assert json.loads(results_file.read_text())["gradable"] is False
        assert "not gradable" in said and "line 2" in said
        assert not (results_file.parent / "grade").exists()  # the job's copy of the hidden suites is gone
    finally:
        shutil.rmtree(results_file.parent)
    assert trial_images(docker_client) == before


if __name__ == "__main__":  # CI builds the stand-in up front (python -m tests.test_package), as it does the grading image
    from grader.sandbox.engine import engine_client
    from grader.sandbox.image import ensure_base

    print(ensure_base(engine_client(), print, packages_for(load_exercise(EXERCISE))))
