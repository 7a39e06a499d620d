"""The Docker backend: one fresh container per submission, removed afterwards whatever happens.

The container: the grading image (Debian, Python, pytest, the harness under /opt/grader), no network,
a read-only root, tmpfs for /job and /tmp, memory and swap, pids and CPU limits, every capability
dropped but the few the root harness needs to run workers as another user and clean up after them, and
`no-new-privileges`. The job goes in on the harness's standard input (files with explicit owners and
modes, nothing bind-mounted from the host); the results come out on its standard output. Nothing of
the host's environment is passed in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import docker
import requests
from docker.types import LogConfig

from grader.core.backend import RawRun
from grader.core.exercise import Exercise
from grader.errors import GradingError
from grader.harness.contract import INPUT_CLOSED, Run, bootstrap
from grader.sandbox.image import HARNESS_PREFIX, ensure_image
from grader.sandbox.interpreter import HARNESS_ENV
from grader.sandbox.layout import (
    JobLayout,
    PreparedSuites,
    WorkerSettings,
    build_layout,
    harness_input,
    prepare_suites,
    run_input,
)
from grader.sandbox.owners import due, is_gone, this_process
from grader.sandbox.warm import WarmSlots
from grader.sandbox.worker_accounts import worker_account

BASE = "/job"
NOBODY = 65534
# What the root harness keeps: start the zygote as the worker's account (SETUID, SETGID) and end that
# account's processes (KILL). Nothing else: every file of the job is the harness's own and workers make
# their folders themselves, so no CHOWN, DAC_OVERRIDE or FOWNER; no network admin, mounts or ptrace.
CAPABILITIES = ["SETUID", "SETGID", "KILL"]
HARNESS_MEMORY_MB = 256  # on top of the worker's limit: pytest, the suites and the reference
HARNESS_PROCESSES = 32  # on top of the worker's: the harness and the next test's worker
HARNESS_CPUS = 1.0  # on top of the worker's: the harness judges while the worker computes
LABEL = "org.grader.job"
OWNER_LABEL = "org.grader.owner"  # the host process that made the container (see `owners`)
SWEEP_INTERVAL_S = 60.0  # how often one process looks for containers whose maker was killed


@dataclass
class DockerTimings:
    create_and_start_s: float = 0.0
    harness_s: float = 0.0
    teardown_s: float = 0.0
    image_s: float = 0.0


@dataclass
class DockerBackend:
    name: ClassVar[str] = "docker"  # what scorecards call it
    client: docker.DockerClient
    last_timings: DockerTimings = field(default_factory=DockerTimings)
    # The grading image's tag per set of an exercise's extra packages, checked (and built if missing) once.
    images: dict[tuple[str, ...], str] = field(default_factory=dict)
    progress: Callable[[str], None] | None = None  # where the lines of an image build go
    jobs: list[str] = field(default_factory=list)  # the label of every container this backend made
    warm: bool = False  # keep a container started and ready for the next submission of the same tier
    # The cgroup the engine places each container under (its default when None): a benchmark gives one of
    # its own, so that the CPU of the containers it caused is read from one place.
    cgroup_parent: str | None = None
    _ready: WarmSlots[StartedContainer] = field(default_factory=WarmSlots, repr=False)
    _engine_cpus: int | None = field(default=None, repr=False)

    def nano_cpus(self, worker_cpus: float) -> int:
        """The container's CPU limit: the worker's, plus one for the harness, at most the engine's CPUs
        (an engine refuses a limit above them)."""
        if self._engine_cpus is None:
            try:
                self._engine_cpus = int(self.client.info().get("NCPU") or 0)
            except (docker.errors.APIError, ValueError, TypeError):
                self._engine_cpus = 0
        cpus = worker_cpus + HARNESS_CPUS
        if self._engine_cpus > 0:
            cpus = min(cpus, max(worker_cpus, self._engine_cpus))
        return int(cpus * 1e9)

    def __call__(self, exercise: Exercise, source: bytes, tier: str, run: Run) -> RawRun:
        began = time.monotonic()
        if exercise.packages not in self.images:
            self.images[exercise.packages] = ensure_image(self.client, self.progress, exercise.packages)
        image_s = time.monotonic() - began
        start = lambda: self.start(exercise, tier)  # noqa: E731
        started = self._ready.take(exercise, tier, start)
        started.timings.image_s = image_s
        raw = started.finish(exercise, source, run, self._ready.refill(exercise, tier, start) if self.warm else None)
        self.last_timings = started.timings
        return raw

    def start(self, exercise: Exercise, tier: str) -> StartedContainer:
        """A container started for this exercise and tier, its harness getting ready for a submission.

        Containers share the host's user ids, and RLIMIT_NPROC counts a user's processes across all of
        them: each concurrent grading gets a worker account of its own, so that one submission's fork
        bomb cannot starve another's workers. (Without root on the host, `nobody` it is.)"""
        image = self.images.get(exercise.packages) or ensure_image(self.client, self.progress, exercise.packages)
        account = contextlib.ExitStack()
        uid, gid = account.enter_context(worker_account())
        layout = build_layout(exercise, tier, WorkerSettings("container", "/usr/bin/python3", uid or NOBODY,
                                                             gid or NOBODY))
        self.jobs.append(layout.name)
        if due("grading containers", SWEEP_INTERVAL_S):
            remove_abandoned(self.client)
        limits = exercise.limits
        timings = DockerTimings()
        phase = time.monotonic()
        container = None
        try:
            container = self.client.containers.create(
                image, ["python3", "-I", "-c", bootstrap(f"/{HARNESS_PREFIX}", "grader.harness.__main__", "main"), BASE],
                # No network: an empty network namespace of the container's own, made by the runtime.
                # `network_disabled` keeps the engine's network layer out of it altogether ("none" alone
                # still has it create and configure a namespace for every container; docs/benchmarks.md).
                user="0:0", working_dir="/tmp", environment=dict(HARNESS_ENV), network_mode="none",
                network_disabled=True,
                read_only=True, tmpfs={BASE: f"rw,size={limits.disk_mb}m,mode=0711",
                                       "/tmp": f"rw,size={limits.disk_mb}m,mode=1777"},
                mem_limit=f"{limits.memory_mb + HARNESS_MEMORY_MB}m",
                memswap_limit=f"{limits.memory_mb + HARNESS_MEMORY_MB}m",
                pids_limit=limits.processes + HARNESS_PROCESSES, nano_cpus=self.nano_cpus(limits.cpus),
                cap_drop=["ALL"], cap_add=CAPABILITIES, security_opt=["no-new-privileges"],
                ipc_mode="private", stdin_open=True, labels={LABEL: layout.name, OWNER_LABEL: this_process()},
                log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": "32m"}),
                ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
                cgroup_parent=self.cgroup_parent,
            )
            attached = container.attach_socket(params={"stdin": 1, "stream": 1})
            container.start()
        except docker.errors.ImageNotFound as exc:
            _remove(container)
            account.close()
            raise GradingError(f"the grading image is missing: {exc}") from None
        except docker.errors.APIError as exc:
            _remove(container)
            account.close()
            raise GradingError(f"the Docker engine refused the grading container: {exc.explanation or exc}") from None
        started = StartedContainer(container, attached, layout, prepare_suites(exercise, tier), account, timings)
        started.send(harness_input(layout))
        timings.create_and_start_s = time.monotonic() - phase
        return started

    def close(self) -> None:
        """Remove the containers waiting for a submission."""
        self._ready.close()


def remove_abandoned(client: docker.DockerClient) -> list[str]:
    """Remove the grading containers whose maker has certainly ended (killed outright, it could not
    remove them: one under way would grade on for nobody, one waiting would stay, exited, forever);
    the ids of those removed. Those of other machines, containers or boots are left alone."""
    try:
        found = client.containers.list(all=True, sparse=True, filters={"label": OWNER_LABEL})
    except docker.errors.APIError:
        return []
    removed = []
    for container in found:
        if is_gone((container.attrs.get("Labels") or {}).get(OWNER_LABEL, "")):
            _remove(container)
            removed.append(str(container.id))
    return removed


def _remove(container: Any) -> None:
    if container is not None:
        try:
            container.remove(force=True)
        except docker.errors.APIError:
            pass


@dataclass
class StartedContainer:
    """A grading container whose harness has its job and waits for the run."""

    container: Any
    attached: Any
    layout: JobLayout
    prepared: PreparedSuites
    account: contextlib.ExitStack
    timings: DockerTimings

    def send(self, data: bytes) -> None:
        try:
            getattr(self.attached, "_sock", self.attached).sendall(data)
        except OSError:
            pass  # the harness died before reading everything; its exit status tells why

    def disconnect(self) -> None:
        """End the connection that holds the container's input: the engine then closes that input (the
        socket itself too; closing the file object docker-py wraps around it leaves it open)."""
        for part in (self.attached, getattr(self.attached, "_sock", None)):
            if part is not None:
                try:
                    part.close()
                except OSError:
                    pass

    def fresh_for(self, exercise: Exercise, tier: str) -> bool:
        if prepare_suites(exercise, tier) is not self.prepared:
            return False
        try:
            self.container.reload()
        except docker.errors.APIError:
            return False
        running: bool = self.container.status == "running"
        return running

    def discard(self) -> None:
        try:
            self.disconnect()
        finally:
            _remove(self.container)
            self.account.close()

    def finish(self, exercise: Exercise, source: bytes, run: Run, then: Callable[[], None] | None = None) -> RawRun:
        """Send the submission with its run, wait for the harness, collect what it printed, remove the container."""
        began = time.monotonic()
        limits = exercise.limits
        timed_out, oom, exit_status, printed, detail = False, False, None, b"", ""
        container = self.container
        try:
            # The container's input stays open until the grading ends: the engine closes it when this
            # connection ends, so a grader killed outright takes its grading along (`end_with_input`).
            self.send(run_input(run, source))
            if then is not None:
                try:
                    then()
                except Exception:
                    pass
            phase = time.monotonic()
            try:
                exit_status = container.wait(timeout=limits.hard_stop_s)["StatusCode"]
            except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
                timed_out = True
                container.kill()
            self.timings.harness_s = time.monotonic() - phase
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            printed = container.logs(stdout=True, stderr=True)
        except docker.errors.APIError as exc:
            raise GradingError(f"the Docker engine failed during the grading: {exc.explanation or exc}") from None
        finally:
            phase = time.monotonic()
            self.disconnect()
            _remove(container)
            self.account.close()
            self.timings.teardown_s = time.monotonic() - phase
        if oom:
            detail = f"the container ran out of memory ({limits.memory_mb + HARNESS_MEMORY_MB} MiB)"
        elif exit_status == 137 and not timed_out:
            detail = "the container was killed (exit status 137)"
        elif exit_status == INPUT_CLOSED and not timed_out:
            detail = ("the container's input closed before the grading ended: the connection to the Docker "
                      "engine that held it was lost")
        return RawRun(output=printed, exit_status=exit_status, timed_out=timed_out,
                      duration_s=time.monotonic() - began, detail=detail, isolation="container")
