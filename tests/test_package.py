"""`grader package`: the bundles, and each one run end to end as its platform runs it.

The platforms' own images come from registries this project does not reach, so a Debian bookworm
root file system stands in for them: the grading image's base (grader/sandbox/image.py, mmdebstrap and
`docker import`) with the packages a bundle installs, built once and kept by its tag. Gradescope: the
zip is unpacked to /autograder/source, setup.sh runs as root (offline: the packages are there
already, so it must install nothing), the container is committed as the autograder's image, and each
submission runs in a fresh container with /autograder/submission and /autograder/results/results.json.
PrairieLearn: the question's image recipe is built on the stand-in, and each submission runs its
entrypoint with /grade/tests, /grade/student and /grade/results mounted and no network.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.bundles import HOST_PACKAGES, gradescope_zip, packages_for, prairielearn_folder
from grader.exercise import load_exercise
from tests.helpers import EXERCISE, REFERENCE, STUB

#: What the platform's container must allow for bubblewrap's namespaces inside it (see the README):
#: `docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined
#: --security-opt systempaths=unconfined`.
PRIVILEGES = ["seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"]
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


# -- the bundles themselves (no engine needed) ------------------------------------------------------

@pytest.fixture(scope="module")
def exercise():
    return load_exercise(EXERCISE)


def test_the_gradescope_zip_has_the_two_scripts_at_its_root_and_carries_the_grader_and_the_exercise(exercise):
    with zipfile.ZipFile(io.BytesIO(gradescope_zip(exercise, "premium", None))) as archive:
        names = set(archive.namelist())
        modes = {info.filename: info.external_attr >> 16 & 0o777 for info in archive.infolist()}
        config = json.loads(archive.read("bundle.json"))
        packages = archive.read("packages.txt").decode().split()
    assert {"setup.sh", "run_autograder"} <= names and modes["run_autograder"] & 0o111
    assert {"grader/cli.py", "grader/bundles/run.py", "grader/harness/worker.py", "grader/templates/report.html.j2",
            "project/exercises/continuous_batching/exercise.toml", "project/hidden_tests/continuous_batching/seed.key",
            "project/solutions/continuous_batching/scheduler.py"} <= names
    assert not any("/mutants/" in name or "__pycache__" in name for name in names)
    assert config["exercise"] == EXERCISE and config["tier"] == "premium" and config["submission"] == "scheduler.py"
    assert set(HOST_PACKAGES) <= set(packages) and "bubblewrap" in packages


def test_the_prairielearn_question_names_its_image_entrypoint_and_timeout_and_keeps_its_uuid(exercise, tmp_path):
    prairielearn_folder(exercise, "free", tmp_path, "someone/grader:1")
    info = json.loads((tmp_path / "info.json").read_text())
    options = info["externalGradingOptions"]
    assert info["type"] == "v3" and info["gradingMethod"] == "External" and uuid.UUID(info["uuid"])
    assert options == {"enabled": True, "image": "someone/grader:1", "entrypoint": "/opt/grader/entrypoint",
                       "timeout": int(exercise.limits.total_timeout_s) + 60, "enableNetworking": False}
    html = (tmp_path / "question.html").read_text()
    assert 'file-name="scheduler.py"' in html and "<pl-external-grader-results>" in html
    assert (tmp_path / "starter_scheduler.py").read_bytes() == STUB.read_bytes()
    assert (tmp_path / "tests" / "project" / "hidden_tests" / EXERCISE / "seed.key").is_file()
    assert not (tmp_path / "tests" / "project" / "solutions").exists()  # the free tier's suites never use it
    assert (tmp_path / "image" / "Dockerfile").read_text().startswith("#")
    first = info["uuid"]
    prairielearn_folder(exercise, "free", tmp_path, "someone/grader:1")
    assert json.loads((tmp_path / "info.json").read_text())["uuid"] == first


def test_the_package_command_refuses_options_of_the_other_platform(tmp_path, capsys):
    from grader.cli import main

    code = main(["package", "--target", "prairielearn", "--exercise", EXERCISE, "--hidden-visibility", "hidden",
                 "-o", str(tmp_path / "q")])
    assert code == 2 and "Gradescope setting" in capsys.readouterr().err
    assert main(["package", "--target", "gradescope", "--exercise", EXERCISE, "--image", "x",
                 "-o", str(tmp_path / "a.zip")]) == 2


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
    code = ("import sys, grader.cli, grader.exports, grader.bundles.run, grader.sandbox.local, grader.report\n"
            "print(sorted({'sqlalchemy', 'alembic', 'docker', 'requests', 'starlette'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.strip() == "[]"


# -- the platforms, stood in for by Debian bookworm containers --------------------------------------

@pytest.fixture(scope="module")
def platform_base(docker_client, exercise) -> str:
    """A Debian bookworm image with what the bundles install (bootstrapped once, kept by its tag)."""
    from grader.sandbox.image import ensure_base

    return ensure_base(docker_client, extra=packages_for(exercise))


def run_container(client, image: str, mounts: dict[Path, str], privileged: bool = True,
                  entrypoint: str | None = None) -> tuple[int, str]:
    """Run a container as the platforms run one (no network, root), with the bind mounts given
    (host folder -> path: read-only unless it is a results folder); returns its exit status and logs.
    `privileged`: with what bubblewrap needs (PRIVILEGES, and no masked /proc paths)."""
    binds = {str(host): {"bind": path, "mode": "rw" if path.endswith("results") else "ro"} for host, path in mounts.items()}
    # The SDK passes security options as they are; systempaths=unconfined is the CLI's name for empty masks.
    options = [option for option in PRIVILEGES if not option.startswith("systempaths=")] if privileged else None
    host_config = client.api.create_host_config(binds=binds, network_mode="none", security_opt=options)
    if privileged:
        host_config.update(MaskedPaths=[], ReadonlyPaths=[])
    environment = {key: os.environ[key] for key in ("GRADER_WORKER_UIDS",) if key in os.environ}
    created = client.api.create_container(image, entrypoint=entrypoint, environment=environment,
                                          volumes=list(mounts.values()), host_config=host_config)
    try:
        client.api.start(created["Id"])
        status = client.api.wait(created["Id"], timeout=900)["StatusCode"]
        return status, client.api.logs(created["Id"]).decode("utf-8", "replace")
    finally:
        client.api.remove_container(created["Id"], force=True)


def submission(base: Path, **files: bytes) -> Path:
    """A submission folder of these files, in `base` (beside the results folder of its run)."""
    folder = base / "submission"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# The platform's unpacking: unzip keeps the modes the zip records.
UNPACK = ("import sys, zipfile, os\n"
          "with zipfile.ZipFile(sys.argv[1]) as z:\n"
          "    for info in z.infolist():\n"
          "        path = z.extract(info, '/autograder/source')\n"
          "        os.chmod(path, info.external_attr >> 16 & 0o777 or 0o644)\n")


@contextlib.contextmanager
def gradescope_autograder(client, base: str, bundle: bytes, folder: Path) -> Iterator[str]:
    """The autograder's image, made as Gradescope makes it: unzip, setup.sh as root, run_autograder
    copied to /autograder; committed so that every submission starts from it afresh."""
    (folder / "autograder.zip").write_bytes(bundle)
    script = (f"python3 -c \"$UNPACK\" /upload/autograder.zip && cd /autograder/source && bash ./setup.sh "
              "&& cp run_autograder /autograder/run_autograder && mkdir -p /autograder/results /autograder/submission")
    container = client.containers.run(base, ["sh", "-c", script], detach=True, network_mode="none",
                                      environment={"UNPACK": UNPACK},
                                      volumes={str(folder): {"bind": "/upload", "mode": "ro"}})
    try:
        status = container.wait(timeout=600)["StatusCode"]
        logs = container.logs().decode("utf-8", "replace")
        assert status == 0, logs
        assert "every package the grader needs is installed" in logs  # offline: setup.sh installed nothing
        repository, tag = "grader-test-gradescope", uuid.uuid4().hex[:12]
        container.commit(repository=repository, tag=tag,
                         conf={"WorkingDir": "/autograder", "Cmd": ["/autograder/run_autograder"]})
    finally:
        container.remove(force=True)
    try:
        yield f"{repository}:{tag}"
    finally:
        client.images.remove(f"{repository}:{tag}", force=True)


@pytest.fixture(scope="module")
def gradescope_image(docker_client, platform_base, exercise, tmp_path_factory):
    with gradescope_autograder(docker_client, platform_base, gradescope_zip(exercise, "premium", None),
                               tmp_path_factory.mktemp("gradescope")) as image:
        yield image


def gradescope_run(client, image: str, tmp_path: Path, files: Path, privileged: bool = True) -> dict:
    results = tmp_path / "results"
    results.mkdir()
    status, logs = run_container(client, image, {files: "/autograder/submission", results: "/autograder/results"},
                                 privileged)
    assert status == 0, logs
    document = json.loads((results / "results.json").read_text())
    assert set(document) <= GRADESCOPE_TOP, set(document) - GRADESCOPE_TOP
    for test in document["tests"]:
        assert set(test) <= GRADESCOPE_TEST and test.get("status", "passed") in ("passed", "failed")
        assert test.get("visibility", "visible") in VISIBILITIES
    return document


@pytest.mark.slow
def test_gradescope_gives_the_reference_full_marks(docker_client, gradescope_image, tmp_path):
    results = gradescope_run(docker_client, gradescope_image, tmp_path,
                             submission(tmp_path, **{"scheduler.py": REFERENCE.read_bytes()}))
    assert results["extra_data"]["status"] == "graded"
    assert results["score"] == results["extra_data"]["max_score"] == sum(t["max_score"] for t in results["tests"]) > 0
    assert all(t["status"] == "passed" for t in results["tests"]) and len(results["tests"]) > 20


@pytest.mark.slow
def test_gradescope_gives_the_stub_under_another_name_zero(docker_client, gradescope_image, tmp_path):
    results = gradescope_run(docker_client, gradescope_image, tmp_path,
                             submission(tmp_path, **{"scheduler (2).py": STUB.read_bytes()}))
    assert results["extra_data"]["status"] == "graded" and results["score"] == 0
    assert results["tests"] and all(t["status"] == "failed" for t in results["tests"])


@pytest.mark.slow
def test_gradescope_rejects_a_syntax_error_with_its_line(docker_client, gradescope_image, tmp_path):
    results = gradescope_run(docker_client, gradescope_image, tmp_path, submission(tmp_path, **{"scheduler.py": SYNTAX_ERROR}))
    assert results["extra_data"]["status"] == "rejected" and results["score"] == 0
    assert "line 2" in results["output"] and "syntax" in results["output"].lower()


@pytest.mark.slow
@pytest.mark.parametrize("files", [{}, {"scheduler.py": b"x = 1\n", "helper.py": b"y = 2\n"}], ids=["none", "two"])
def test_gradescope_rejects_no_file_or_two_files_saying_what_it_expects(docker_client, gradescope_image, tmp_path, files):
    results = gradescope_run(docker_client, gradescope_image, tmp_path, submission(tmp_path, **files))
    assert results["extra_data"]["status"] == "rejected" and results["score"] == 0
    assert "submit only your scheduler.py" in results["output"] if files else "no file was submitted" in results["output"]
    assert all(t["status"] == "failed" for t in results["tests"])


@pytest.mark.slow
def test_gradescope_without_the_namespaces_the_run_fails_closed_and_says_why(docker_client, gradescope_image, tmp_path):
    results = gradescope_run(docker_client, gradescope_image, tmp_path,
                             submission(tmp_path, **{"scheduler.py": REFERENCE.read_bytes()}), privileged=False)
    assert results["extra_data"]["status"] == "error"
    assert "the autograder could not run" in results["output"] and "namespace" in results["output"]
    assert results.get("score", 0) == 0 and not any(t["status"] == "passed" for t in results["tests"])


@pytest.mark.slow
def test_gradescope_shows_the_premium_suite_when_the_instructor_chose(docker_client, platform_base, exercise, tmp_path):
    bundle = gradescope_zip(exercise, "premium", "after_due_date")
    with gradescope_autograder(docker_client, platform_base, bundle, tmp_path) as image:
        results = gradescope_run(docker_client, image, tmp_path / "run",
                                 submission(tmp_path / "run", **{"scheduler.py": REFERENCE.read_bytes()}))
    by_suite = {t["tags"][0]: t.get("visibility", "visible") for t in results["tests"]}
    assert by_suite["hidden"] == "after_due_date" and by_suite["visible"] == "visible"


def test_the_chosen_visibility_travels_in_the_bundle_to_the_export_command(exercise):
    from grader.bundles.run import PLATFORMS, export_command

    with zipfile.ZipFile(io.BytesIO(gradescope_zip(exercise, "premium", "hidden"))) as archive:
        config = json.loads(archive.read("bundle.json"))
    command = export_command(Path("card.json"), PLATFORMS["gradescope"], config["hidden_visibility"])
    assert command[-2:] == ["--hidden-visibility", "hidden"] and "/autograder/results/results.json" in command
    assert "--hidden-visibility" not in export_command(Path("card.json"), PLATFORMS["gradescope"], None)


@pytest.fixture(scope="module")
def prairielearn_question(docker_client, platform_base, exercise, tmp_path_factory):
    """The question folder, and its grading image built from its own recipe on the stand-in base."""
    folder = tmp_path_factory.mktemp("prairielearn")
    tag = f"grader-test-prairielearn:{uuid.uuid4().hex[:12]}"
    prairielearn_folder(exercise, "premium", folder, tag)
    docker_client.images.build(path=str(folder / "image"), tag=tag, buildargs={"BASE": platform_base}, pull=False,
                               rm=True, forcerm=True, network_mode="none")
    yield folder, tag
    docker_client.images.remove(tag, force=True)


def prairielearn_run(client, question, tmp_path: Path, files: Path, privileged: bool = True,
                     exit_status: int = 0) -> dict:
    folder, image = question
    results = tmp_path / "results"
    results.mkdir()
    info = json.loads((folder / "info.json").read_text())["externalGradingOptions"]
    status, logs = run_container(client, image, {folder / "tests": "/grade/tests", files: "/grade/student",
                                                       results: "/grade/results"}, privileged, info["entrypoint"])
    assert status == exit_status, logs
    document = json.loads((results / "results.json").read_text())
    assert set(document) <= PRAIRIELEARN_TOP, set(document) - PRAIRIELEARN_TOP
    assert isinstance(document["gradable"], bool) and 0 <= document["score"] <= 1
    assert all(set(test) <= PRAIRIELEARN_TEST for test in document.get("tests", []))
    return document


@pytest.mark.slow
def test_prairielearn_gives_the_reference_full_marks_and_the_stub_zero(docker_client, prairielearn_question, tmp_path):
    full = prairielearn_run(docker_client, prairielearn_question, tmp_path / "r",
                            submission(tmp_path / "r", **{"scheduler.py": REFERENCE.read_bytes()}))
    assert full["gradable"] is True and full["score"] == 1
    assert all(t["points"] == t["max_points"] > 0 for t in full["tests"]) and len(full["tests"]) > 20
    zero = prairielearn_run(docker_client, prairielearn_question, tmp_path / "s",
                            submission(tmp_path / "s", **{"scheduler.py": STUB.read_bytes()}))
    assert zero["gradable"] is True and zero["score"] == 0 and all(t["points"] == 0 for t in zero["tests"])


@pytest.mark.slow
def test_prairielearn_marks_a_syntax_error_and_two_files_not_gradable_with_the_reason(docker_client, prairielearn_question,
                                                                                      tmp_path):
    broken = prairielearn_run(docker_client, prairielearn_question, tmp_path / "e",
                              submission(tmp_path / "e", **{"scheduler.py": SYNTAX_ERROR}))
    assert broken["gradable"] is False and "line 2" in " ".join(broken["format_errors"])
    two = prairielearn_run(docker_client, prairielearn_question, tmp_path / "t",
                           submission(tmp_path / "t",
                                      **{"scheduler.py": REFERENCE.read_bytes(), "notes.py": b"x = 1\n"}))
    assert two["gradable"] is False and "submit only your scheduler.py" in " ".join(two["format_errors"])



@pytest.mark.slow
def test_prairielearn_without_the_namespaces_the_job_fails_closed_and_says_why(docker_client, prairielearn_question,
                                                                               tmp_path):
    results = prairielearn_run(docker_client, prairielearn_question, tmp_path,
                               submission(tmp_path, **{"scheduler.py": REFERENCE.read_bytes()}), privileged=False,
                               exit_status=1)  # PrairieLearn marks the job failed by its exit status, not a 0
    assert results["succeeded"] is False and results["score"] == 0 and not results.get("tests")
    assert "the autograder could not run" in results["message"] and "namespace" in results["output"]

if __name__ == "__main__":  # CI builds the stand-in up front (python -m tests.test_package), as it does the grading image
    from grader.sandbox.engine import engine_client
    from grader.sandbox.image import ensure_base

    print(ensure_base(engine_client(), print, packages_for(load_exercise(EXERCISE))))
