"""The Docker backend against a real engine: required under CI=true, skipped without an engine."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.docker_backend import LABEL, DockerBackend, StartedContainer
from grader.sandbox.engine import engine_client
from tests.helpers import EXERCISE, REFERENCE, STUB, exercise_copy


@pytest.fixture(scope="module")
def backend(docker_client, grading_image):
    return DockerBackend(docker_client)


def leftover_containers(client, backend: DockerBackend) -> list:
    """Containers of this backend's own jobs still there (other gradings may share the engine)."""
    return [c for job in backend.jobs for c in client.containers.list(all=True, filters={"label": f"{LABEL}={job}"})]


def grade(backend, data: bytes, exercise=None, tier: str = "premium"):
    return grade_bytes(data, exercise or load_exercise(EXERCISE), tier, backend, "docker")


def test_the_reference_gets_full_marks_in_a_container_that_is_removed(backend, docker_client):
    card = grade(backend, REFERENCE.read_bytes())
    assert card.status == "graded", card.reason
    assert card.score == card.max_score > 0 and len(card.tests) > 7
    assert card.backend == "docker" and backend.jobs
    assert leftover_containers(docker_client, backend) == []
    timings = backend.last_timings
    assert timings.harness_s > 0 and timings.create_and_start_s > 0


def test_the_stub_scores_zero_with_not_implemented_on_every_test(backend):
    card = grade(backend, STUB.read_bytes(), tier="free")
    assert card.status == "graded" and card.score == 0
    assert all(t.status == "failed" and "not implemented" in t.message for t in card.tests)


def probe(says: str) -> bytes:
    """A submission whose add() raises a ValueError with the message `says` (an expression): what its
    worker sees, reported to the test through the scorecard."""
    return f'''
import os, time
class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid = rid
class Scheduler:
    def __init__(self, *args):
        pass
    def add(self, req):
        raise ValueError({says})
'''.encode()


def test_the_host_environment_never_reaches_the_container(backend, monkeypatch):
    monkeypatch.setenv("GRADER_CANARY_SECRET", "canary-5d1f0c9a")
    source = probe('"ENV:" + repr(dict(os.environ)) + open("/proc/1/environ", "rb").read().decode("latin-1")')
    card = grade(backend, source, tier="free")
    text = card.to_json()
    assert card.score == 0 and "canary-5d1f0c9a" not in text
    assert "GRADER_CANARY_SECRET" not in text
    assert "ENV:" in text  # the submission's message itself still reaches the student


def test_each_grading_container_has_an_empty_network_namespace_of_its_own(backend, docker_client):
    """No interface but loopback, and a namespace that is neither the host's nor that of a grading
    running beside it: nothing listening in one grading can be reached from another."""
    # Each submission holds its container for a while, so that the two gradings overlap (a namespace's
    # number is only unique among the namespaces alive at once).
    source = probe('time.sleep(1.5) or "NETNS:" + os.readlink("/proc/self/ns/net") + " IF:" + '
                   '"+".join(sorted(os.listdir("/sys/class/net"))) + " END"')
    side_client = engine_client()  # a connection per grading thread, as in a batch
    side = DockerBackend(side_client)
    try:
        with ThreadPoolExecutor(2) as pool:
            cards = list(pool.map(lambda b: grade(b, source, tier="free"), [backend, side]))
    finally:
        side_client.close()
    seen = []
    for card in cards:
        said = next(t.message for t in card.tests if "NETNS:" in t.message)
        assert said.split(" IF:")[1].split(" END")[0] == "lo"
        seen.append(said.split("NETNS:")[1].split()[0])
    assert seen[0] != seen[1] and os.readlink("/proc/self/ns/net") not in seen
    assert leftover_containers(docker_client, side) == []


def test_a_run_past_the_grading_time_is_stopped_and_graded_with_its_tests_not_run(backend, docker_client, tmp_path):
    exercise = load_exercise(str(exercise_copy(tmp_path, total_timeout_s=4, import_timeout_s=30,
                                               call_timeout_s=30, test_timeout_s=60)))
    started = time.monotonic()
    card = grade(backend, b"while True:\n    pass\n", exercise, tier="free")
    assert time.monotonic() - started < 30
    assert card.status == "graded" and card.score == 0, card.reason
    messages = {t.message for t in card.tests}
    assert all(t.status == "timeout" for t in card.tests)
    assert "the grading's time ran out (4 s) during this test" in messages
    assert leftover_containers(docker_client, backend) == []


def test_a_grading_whose_engine_connection_is_lost_ends_at_once_and_is_graded_error(backend, docker_client,
                                                                                   monkeypatch):
    """The container's input is held open until the grading ends; it closes early only when the host's
    connection to the engine ends (a grader killed outright), and the harness then leaves at once,
    with the container: here the connection is lost right after the submission is sent."""
    sent = StartedContainer.send

    def send_then_lose_the_connection(self, data: bytes) -> None:
        sent(self, data)
        self.sends = getattr(self, "sends", 0) + 1
        if self.sends == 2:  # the run, after the job
            self.disconnect()

    monkeypatch.setattr(StartedContainer, "send", send_then_lose_the_connection)
    started = time.monotonic()
    # Each schedule() sleeps: the grading would take minutes if it went on.
    card = grade(backend, REFERENCE.read_bytes().replace(
        b"    def schedule(self) -> list[tuple[Req, int]]:\n",
        b"    def schedule(self) -> list[tuple[Req, int]]:\n        import time\n        time.sleep(2)\n", 1))
    assert time.monotonic() - started < 30
    assert card.status == "error" and card.score == 0
    assert "input closed before the grading ended" in card.reason
    assert leftover_containers(docker_client, backend) == []


def test_a_container_that_runs_out_of_memory_is_graded_error_with_the_reason(backend, docker_client, tmp_path):
    # Each process stays under the worker's address-space limit, but together they exceed the
    # container's memory: the kernel's OOM killer ends the container before any results exist.
    exercise = load_exercise(str(exercise_copy(tmp_path, memory_mb=200, processes=16, import_timeout_s=20)))
    source = b'''
import os, time
for _ in range(12):
    if os.fork() == 0:
        block = bytearray(150 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
block = bytearray(150 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(60)
'''
    card = grade(backend, source, exercise, tier="free")
    assert card.score == 0 and card.status in ("error", "graded")
    if card.status == "error":
        assert "out of memory" in card.reason or "killed" in card.reason
    else:  # the OOM killer picked the workers, not the harness: every test still failed
        assert all(t.status in ("crashed", "timeout", "failed") for t in card.tests)
    assert leftover_containers(docker_client, backend) == []


def test_auto_chooses_docker_when_an_engine_answers(docker_client, capsys):
    from grader.cli import main

    assert main(["grade", str(STUB), "--exercise", EXERCISE, "--tier", "free"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "sandbox: docker" in out and "docker sandbox" in out


def test_a_grading_container_is_locked_down_with_the_harness_headroom_on_top_of_the_workers_limits(backend):
    """The container's limits are the exercise's (for the worker) plus the harness's own headroom:
    memory, processes and a CPU, so that the harness judges while the worker computes."""
    from grader.sandbox.docker_backend import HARNESS_CPUS, HARNESS_MEMORY_MB, HARNESS_PROCESSES

    exercise = load_exercise(EXERCISE)
    limits = exercise.limits
    started = backend.start(exercise, "free")
    try:
        started.container.reload()
        host = started.container.attrs["HostConfig"]
    finally:
        started.discard()
    engine_cpus = backend.client.info()["NCPU"]
    assert host["NanoCpus"] == int(min(limits.cpus + HARNESS_CPUS, max(limits.cpus, engine_cpus)) * 1e9)
    assert host["Memory"] == (limits.memory_mb + HARNESS_MEMORY_MB) * 1024 * 1024 == host["MemorySwap"]
    assert host["PidsLimit"] == limits.processes + HARNESS_PROCESSES
    assert host["ReadonlyRootfs"] is True and host["NetworkMode"] == "none"
    assert started.container.attrs["Config"].get("NetworkDisabled") is True
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
    assert "no-new-privileges" in host["SecurityOpt"]


@pytest.mark.unit
def test_the_harness_cpu_is_never_more_than_the_engine_has():
    """An engine refuses a CPU limit above its CPUs: on a one-CPU engine the container gets one."""

    class OneCpuEngine:
        def info(self):
            return {"NCPU": 1}

    assert DockerBackend(OneCpuEngine()).nano_cpus(1.0) == 1_000_000_000
    assert DockerBackend(OneCpuEngine()).nano_cpus(0.5) == 1_000_000_000
    assert DockerBackend(type("TwoCpus", (), {"info": lambda self: {"NCPU": 2}})()).nano_cpus(1.0) == 2_000_000_000
