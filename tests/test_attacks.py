"""Every hostile submission in tests/attacks/ scores 0, ends with the right statuses, in bounded time,
and leaks nothing of the hidden suite, the reference or the host's environment.

Each attack file declares in its docstring `expect: <statuses>` (what every test may end as, or
`rejected`) and, optionally, `backend: docker` when it only makes sense in a container. The same
attacks run through the local sandbox here and through Docker when an engine is available.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.docker_backend import HARNESS_MEMORY_MB as DOCKER_HARNESS_MEMORY_MB
from grader.sandbox.local import run_local
from tests.helpers import ATTACKS, EXERCISE, PROJECT, REFERENCE

CANARY = "GRADER_CANARY_SECRET"
CANARY_VALUE = "canary-7f3a9e21-do-not-leak"
# Attacks that hunt for premium material or target comparisons need the premium tier (the hidden suite
# and the reference are then in the sandbox); the others run the visible suite only, to stay quick.
PREMIUM = {"read_secrets", "patch_pytest", "always_equal", "int_subclass", "forge_results",
           "credit_from_another_lane"}  # the premium tier has tests enough for two lanes (local, as root)
TIME_LIMIT_S = 150
HELD = re.compile(r"held (\d+) MiB in all")
# What an attack says when a call of its ran past what any limit allows (twice the limit, on the wall).
BENT = "outlived its time limit"
# A grading's memory: its confinement's control group (local), its container (Docker).
MEMORY_BOUND_MIB = load_exercise(EXERCISE).limits.group_memory_mb
DOCKER_MEMORY_BOUND_MIB = load_exercise(EXERCISE).limits.memory_mb + DOCKER_HARNESS_MEMORY_MB


def attack_files() -> list[Path]:
    return sorted(p for p in ATTACKS.iterdir() if p.is_file() and p.suffix in (".py", ".bin"))


def declared(path: Path) -> tuple[set[str], set[str]]:
    head = path.read_bytes()[:2000].decode("utf-8", errors="replace")
    expect = re.search(r"^expect:\s*(.+)$", head, re.M)
    backend = re.search(r"^backend:\s*(.+)$", head, re.M)
    statuses = {s.strip() for s in expect.group(1).split(",")} if expect else {"rejected"}
    return statuses, ({b.strip() for b in backend.group(1).split(",")} if backend else {"local", "docker"})


def secret_lines() -> set[str]:
    """Distinctive lines of the hidden suite and the reference that no public file contains."""
    public = set()
    for path in [*(PROJECT / "exercises" / EXERCISE).rglob("*.py"), PROJECT / "exercises" / EXERCISE / "README.md"]:
        public.update(line.strip() for line in path.read_text().splitlines())
    secret = set()
    for path in [*(PROJECT / "hidden_tests" / EXERCISE).glob("*.py"), REFERENCE]:
        for line in path.read_text().splitlines():
            line = line.strip()
            if len(line) >= 30 and line not in public and not line.startswith(("#", '"""')):
                secret.add(line)
    return secret


SECRETS = secret_lines()


def check(card, path: Path, elapsed: float, memory_bound_mib: int = MEMORY_BOUND_MIB) -> None:
    statuses, _ = declared(path)
    assert card.score == 0, f"{path.name} scored {card.score}"
    assert elapsed < TIME_LIMIT_S, f"{path.name} took {elapsed:.0f} s"
    text = card.to_json()
    assert CANARY_VALUE not in text and CANARY not in text
    leaked = [line for line in SECRETS if line in text]
    assert not leaked, f"{path.name} leaked {leaked[:3]}"
    if statuses == {"rejected"}:
        assert card.status == "rejected", (card.status, card.reason)
        assert card.reason
        return
    assert card.status == "graded", (card.status, card.reason)
    assert card.tests and all(t.score == 0 for t in card.tests)
    wrong = [(t.name, t.status, t.message[:200]) for t in card.tests if t.status not in statuses]
    assert not wrong, f"{path.name}: expected statuses {statuses}, got {wrong}"
    # What an attack says it held of memory, in any form, stays within the grading's limit.
    held = [int(found.group(1)) for t in card.tests for found in [HELD.search(t.message)] if found]
    assert all(mib <= memory_bound_mib for mib in held), f"{path.name} held {held} MiB"
    bent = [(t.name, t.message[:200]) for t in card.tests if BENT in t.message]
    assert not bent, f"{path.name} ran past its limits: {bent}"


def run(path: Path, backend, name: str, exercise=None):
    tier = "premium" if path.stem in PREMIUM else "free"
    started = time.monotonic()
    card = grade_bytes(path.read_bytes(), exercise or load_exercise(EXERCISE), tier, backend, name)
    return card, time.monotonic() - started


@pytest.fixture(autouse=True)
def canary(monkeypatch):
    monkeypatch.setenv(CANARY, CANARY_VALUE)


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in command:
                found.append(f"{entry.name}: {command[:200]!r}")
    return found


@pytest.mark.parametrize("path", [p for p in attack_files() if "local" in declared(p)[1]], ids=lambda p: p.stem)
def test_attack_on_the_local_sandbox(path, monkeypatch):
    import grader.sandbox.folders as folders

    jobs: list[str] = []
    make_folder = folders.tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        jobs.append(make_folder(*args, **kwargs))
        return jobs[-1]

    monkeypatch.setattr(folders.tempfile, "mkdtemp", recording_mkdtemp)
    card, elapsed = run(path, run_local, "local")
    check(card, path, elapsed)
    if declared(path)[0] == {"rejected"}:
        assert jobs == [], "a refused file must not reach a sandbox"
    # Workers carry their job folder in their command line: none of this grading's may be left.
    for job in jobs:
        assert processes_mentioning(job) == [], "a process of the submission outlived its grading"


@pytest.mark.parametrize("path", [p for p in attack_files() if "docker" in declared(p)[1]], ids=lambda p: p.stem)
def test_attack_on_the_docker_sandbox(path, docker_client, grading_image):
    from grader.sandbox.docker_backend import LABEL, DockerBackend

    backend = DockerBackend(docker_client)
    card, elapsed = run(path, backend, "docker")
    check(card, path, elapsed, DOCKER_MEMORY_BOUND_MIB)
    for job in backend.jobs:  # this grading's own container, never the engine's others
        assert docker_client.containers.list(all=True, filters={"label": f"{LABEL}={job}"}) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in attack_files() if "local" in declared(p)[1]], ids=lambda p: p.stem)
def test_attack_on_a_worker_in_an_account_of_its_own(path, private_project, account_backend):
    exercise = load_exercise(str(private_project / "exercises" / EXERCISE))
    card, elapsed = run(path, account_backend, "local", exercise)
    check(card, path, elapsed)
    assert card.isolation == ("" if card.status == "rejected" else "account")



# -- two gradings at once ----------------------------------------------------------------------------

TOGETHER = ATTACKS / "credit_from_another_lane.py"  # a spinner in one grading, a waiter in the other


def graded_together(backend, name: str, exercise=None) -> list:
    """The same attack graded twice at once (one student's two submissions, or two who agree): whichever
    grading finds the CPUs idle spins, the other waits behind it. Neither may earn time from the other."""
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run, TOGETHER, backend, name, exercise) for _ in range(2)]
        return [future.result() for future in runs]


def test_two_gradings_at_once_earn_no_time_from_each_other_on_the_local_sandbox():
    for card, elapsed in graded_together(run_local, "local"):
        check(card, TOGETHER, elapsed)


def test_two_gradings_at_once_earn_no_time_from_each_other_in_docker(docker_client, grading_image):
    from grader.sandbox.docker_backend import DockerBackend

    for card, elapsed in graded_together(DockerBackend(docker_client), "docker"):
        check(card, TOGETHER, elapsed, DOCKER_MEMORY_BOUND_MIB)


@pytest.mark.slow
def test_two_gradings_at_once_earn_no_time_from_each_other_in_accounts_of_their_own(private_project, account_backend):
    exercise = load_exercise(str(private_project / "exercises" / EXERCISE))
    for card, elapsed in graded_together(account_backend, "local", exercise):
        check(card, TOGETHER, elapsed)
        assert card.isolation == "account"


# -- a rare hang -------------------------------------------------------------------------------------

RARE_HANG = ATTACKS / "partial" / "rare_hang.py"


def rare_hang_and_control() -> tuple[bytes, bytes]:
    """The reference with a hang where max_seqs == 1, and its control, which raises there instead."""
    patch = RARE_HANG.read_text()
    loop = "while True:  # the hang\n            pass"
    assert loop in patch
    control = patch.replace(loop, 'raise RuntimeError("max_seqs == 1")')
    return (REFERENCE.read_text() + "\n\n" + patch).encode(), (REFERENCE.read_text() + "\n\n" + control).encode()


def check_rare_hang(backend, name: str, exercise=None) -> None:
    exercise = exercise or load_exercise(EXERCISE)
    hang, control = rare_hang_and_control()
    cards = [grade_bytes(source, exercise, "premium", backend, name) for source in (hang, control)]
    for card in cards:
        assert card.status == "graded", card.reason
    lost = [{t.name: t.status for t in card.tests if t.status != "passed"} for card in cards]
    assert lost[1] and set(lost[1].values()) == {"failed"}, lost[1]
    # The hang loses exactly the tests that reach max_seqs == 1, each as a timeout; every other test ran.
    assert lost[0] == dict.fromkeys(lost[1], "timeout"), (lost[0], lost[1])
    assert cards[0].score == cards[1].score > 0
    assert all("ran out of time" in t.message for t in cards[0].tests if t.status == "timeout")


def test_a_rare_hang_costs_only_the_tests_that_reach_it_on_the_local_sandbox():
    check_rare_hang(run_local, "local")


def test_a_rare_hang_costs_only_the_tests_that_reach_it_in_docker(docker_client, grading_image):
    from grader.sandbox.docker_backend import DockerBackend

    check_rare_hang(DockerBackend(docker_client), "docker")


@pytest.mark.slow
def test_a_rare_hang_costs_only_the_tests_that_reach_it_in_accounts_of_their_own(private_project, account_backend):
    check_rare_hang(account_backend, "local", load_exercise(str(private_project / "exercises" / EXERCISE)))
