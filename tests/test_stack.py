"""The course server from docker-compose.yml, as a department runs it: brought up with one command, a
student's submission graded by a worker behind the TLS proxy, the results released, the course backed up,
restored into a fresh stack, and found there the same.

Slow: it builds the stack's images (from the base `grader image build` made, and Debian's packages) and
starts two stacks: the first with Debian's docker-compose 1.29, the restored one with the compose plugin
(where the machine has both; CI has). It needs a Docker engine and docker-compose or the compose plugin:
skipped without them, except under CI=true, where .ci/run installs both and it must run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess

import pytest

from tests.service import csrf_of, press_sign_in, wait_graded
from tests.stack import PROJECT, STUDENT_LINK, Stack, compose_command, compose_commands, prepare_images, stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

EXERCISE = "continuous_batching"
REFERENCE = PROJECT / "solutions" / EXERCISE / "scheduler.py"
ISSUER = "https://canvas.example.edu"
# What a fresh stack adds on its own when it starts: its instructor's one-time link, the sessions of whoever
# signs in. Everything else of the course must come back as it was.
ADDED_BY_A_START = ("links", "sessions")


@pytest.fixture(scope="module")
def images():
    if compose_command() is None or shutil.which("docker") is None or subprocess.run(
            ["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail("CI=true but no Docker engine and docker-compose: .ci/run installs them", pytrace=False)
        pytest.skip("needs a Docker engine and docker-compose (Debian: apt-get install docker.io docker-compose)")
    return prepare_images()


@pytest.fixture(scope="module")
def composes() -> tuple[list[str], list[str]]:
    """Who brings up the first stack and who the restored one: docker-compose 1.29, then the compose
    plugin, where the machine has both (CI does: .ci/run installs both); else the one it has, twice."""
    found = compose_commands()
    if len(found) < 2 and os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true but only {found} of docker-compose and the compose plugin: .ci/run installs both",
                    pytrace=False)
    return found[0], found[-1]


def signed_in(where: Stack, link_path: str):
    client = where.client()
    pressed = press_sign_in(client, link_path)
    assert pressed.status_code == 303, pressed.text[:500]
    page = client.get(pressed.headers["location"])
    assert page.status_code == 200, page.text[:500]
    return client, csrf_of(page)


def without_tokens(page: str) -> str:
    """A page without its session's CSRF tokens (a new session has new ones)."""
    return re.sub(r'name="csrf" value="[^"]+"', "", page)


def test_a_term_on_one_command_grades_backs_up_and_restores_into_a_fresh_stack(tmp_path, images, composes):
    # Each Compose the file is written for brings one of the two stacks up from it.
    with stack("smoke", tmp_path, images, composes[0]) as first:
        first.build()
        first.up()
        first.wait_ready()
        instructor, csrf = signed_in(first, first.instructor_link())
        # Results held until the instructor releases them (the exercise shows them at once by default).
        first.exec_web("python3", "-c", "import os; from grader.course.store import Store; Store(os.environ["
                       f"'GRADER_DB']).set_exercise_terms('{EXERCISE}', {{'release': 'on_release'}}, 'instructor')")
        roster = instructor.post("/instructor/roster", data={"csrf": csrf, "csv": "id,tier\nada,premium\n"})
        assert roster.status_code == 200, roster.text[:500]
        links = {student: re.sub(r"^https?://[^/]+", "", link) for student, link in STUDENT_LINK.findall(roster.text)}
        student, token = signed_in(first, links["ada"])
        student.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        submitted = student.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": REFERENCE.read_text()})
        assert re.search(r"/submissions/\d+$", str(submitted.url)), submitted.text[:500]
        graded = wait_graded(student, submitted.url.path, wait_s=600)
        assert "graded" in graded.extensions["states"]
        worker_log = first.compose("logs", "--no-color", "worker").stdout
        assert re.search(r"graded submission=\d+ outcome=graded score=(\d+)/\1 ", worker_log), worker_log
        released = instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf},
                                   follow_redirects=False)
        assert released.status_code == 303, released.text[:500]
        first.exec_web("grader", "lti", "add-platform", "--issuer", ISSUER, "--client-id", "42", "--deployment", "1",
                       "--auth-login-url", f"{ISSUER}/login", "--auth-token-url", f"{ISSUER}/token",
                       "--keyset-url", f"{ISSUER}/jwks", "--tier", "premium", "--base-url", "https://localhost/")
        report = without_tokens(student.get(f"{submitted.url.path}/report").text)
        first.exec_web("grader", "backup", "--spool", "/var/lib/grader/spool", "--out", "/var/lib/grader/course.tar.gz")
        archive = tmp_path / "course.tar.gz"
        subprocess.run(["docker", "cp", f"{first.container('web')}:/var/lib/grader/course.tar.gz", str(archive)],
                       check=True, capture_output=True, timeout=120)
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        before = first.tables()
        card = json.loads(first.exec_web("python3", "-c", "import os; from grader.course.store import Store; "
                                         "print(Store(os.environ['GRADER_DB']).scorecard(1).to_json())"))
        # Graded in the Docker sandbox, a container of its own, through the engine's socket.
        assert (card["backend"], card["isolation"], card["score"]) == ("docker", "container", card["max_score"])

    with stack("restored", tmp_path, images, composes[1]) as second:
        second.up()
        second.wait_ready()
        second.compose("stop", "web", "worker")
        subprocess.run(["docker", "cp", str(archive), f"{second.container('web')}:/var/lib/grader/course.tar.gz"],
                       check=True, capture_output=True, timeout=120)
        said = second.compose("run", "--rm", "--no-deps", "web", "grader", "restore", "/var/lib/grader/course.tar.gz",
                              "--spool", "/var/lib/grader/spool").stdout
        assert "restored" in said, said
        second.up()
        second.wait_ready()
        after = second.tables()
        for table in sorted(set(before) | set(after)):
            if table not in ADDED_BY_A_START:
                assert after.get(table) == before.get(table), table
        assert before["submissions"] and before["scorecards"] and before["lti_platforms"]
        # The student's own link still signs in (its hash and the session key came back), and the report is
        # the one graded before.
        again, _ = signed_in(second, links["ada"])
        assert without_tokens(again.get(f"{submitted.url.path}/report").text) == report
