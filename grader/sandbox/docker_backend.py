"""The Docker backend: one fresh container per submission, removed afterwards whatever happens.

The container: the grading image (Debian, Python, pytest, the harness under /opt/grader), no network,
a read-only root, tmpfs for /job and /tmp, memory and swap, pids and CPU limits, every capability
dropped but the few the root harness needs to run workers as another user and clean up after them, and
`no-new-privileges`. The job goes in on the harness's standard input (files with explicit owners and
modes, nothing bind-mounted from the host); the results come out on its standard output. Nothing of
the host's environment is passed in.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import docker
import requests
from docker.types import LogConfig

from grader.errors import GradingError
from grader.exercise import Exercise
from grader.harness.__main__ import BOOTSTRAP
from grader.sandbox.image import HARNESS_PREFIX, ensure_image
from grader.sandbox.layout import RawRun, build_layout, harness_input, results_from_output
from grader.sandbox.local import HARNESS_ENV, tail, worker_account

BASE = "/job"
NOBODY = 65534
# What the root harness keeps: switch to the worker's user, give it its folders, remove what it
# wrote, and signal its processes. Everything else (network admin, mounts, ptrace...) is dropped.
CAPABILITIES = ["SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL"]
HARNESS_MEMORY_MB = 256  # on top of the worker's limit: pytest, the suites and the reference
HARNESS_PROCESSES = 32  # on top of the worker's: the harness and the next test's worker
LABEL = "org.grader.job"


@dataclass
class DockerTimings:
    create_and_start_s: float = 0.0
    harness_s: float = 0.0
    teardown_s: float = 0.0
    image_s: float = 0.0


@dataclass
class DockerBackend:
    client: docker.DockerClient
    last_timings: DockerTimings = field(default_factory=DockerTimings)
    images: dict[tuple[str, ...], str] = field(default_factory=dict)  # per set of an exercise's extra packages,
    # the grading image's tag, checked (and built if missing) once per backend
    progress: Callable[[str], None] | None = None  # where the lines of an image build go

    def __call__(self, exercise: Exercise, source: bytes, tier: str) -> RawRun:
        timings = DockerTimings()
        started = time.monotonic()
        if exercise.packages not in self.images:
            self.images[exercise.packages] = ensure_image(self.client, self.progress, exercise.packages)
        timings.image_s = time.monotonic() - started
        # Containers share the host's user ids, and RLIMIT_NPROC counts a user's processes across all of
        # them: each concurrent grading gets a worker account of its own, so that one submission's fork
        # bomb cannot starve another's workers. (Without root on the host, `nobody` it is.)
        with worker_account() as (uid, gid):
            return self._run(exercise, source, tier, uid or NOBODY, gid or NOBODY, timings, started)

    def _run(self, exercise: Exercise, source: bytes, tier: str, uid: int, gid: int, timings: DockerTimings,
             started: float) -> RawRun:
        layout = build_layout(exercise, source, tier, base=BASE, python="/usr/bin/python3",
                              harness_root=f"/{HARNESS_PREFIX}", worker_user=uid, worker_group=gid)
        limits = exercise.limits
        container = None
        timed_out, oom, exit_status, printed, detail = False, False, None, b"", ""
        phase = time.monotonic()
        try:
            container = self.client.containers.create(
                self.images[exercise.packages], ["python3", "-I", "-c", BOOTSTRAP.format(root=f"/{HARNESS_PREFIX}"), BASE],
                user="0:0", working_dir="/tmp", environment=dict(HARNESS_ENV), network_mode="none",
                read_only=True, tmpfs={BASE: f"rw,size={limits.disk_mb}m,mode=0711",
                                       "/tmp": f"rw,size={limits.disk_mb}m,mode=1777"},
                mem_limit=f"{limits.memory_mb + HARNESS_MEMORY_MB}m",
                memswap_limit=f"{limits.memory_mb + HARNESS_MEMORY_MB}m",
                pids_limit=limits.processes + HARNESS_PROCESSES, nano_cpus=int(limits.cpus * 1e9),
                cap_drop=["ALL"], cap_add=CAPABILITIES, security_opt=["no-new-privileges"],
                ipc_mode="private", stdin_open=True, labels={LABEL: exercise.slug},
                log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": "32m"}),
                ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
            )
            attached = container.attach_socket(params={"stdin": 1, "stream": 1})
            container.start()
            raw = getattr(attached, "_sock", attached)
            try:
                raw.sendall(harness_input(layout))
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the harness died before reading everything; its exit status tells why
            finally:
                attached.close()
            timings.create_and_start_s = time.monotonic() - phase
            phase = time.monotonic()
            try:
                exit_status = container.wait(timeout=limits.total_timeout_s)["StatusCode"]
            except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
                timed_out = True
                container.kill()
            timings.harness_s = time.monotonic() - phase
            container.reload()
            oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            printed = container.logs(stdout=True, stderr=True)
        except docker.errors.ImageNotFound as exc:
            raise GradingError(f"the grading image is missing: {exc}") from None
        except docker.errors.APIError as exc:
            raise GradingError(f"the Docker engine refused the grading container: {exc.explanation or exc}") from None
        finally:
            phase = time.monotonic()
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.APIError:
                    pass
            timings.teardown_s = time.monotonic() - phase
        if oom:
            detail = f"the container ran out of memory ({limits.memory_mb + HARNESS_MEMORY_MB} MiB)"
        elif exit_status == 137 and not timed_out:
            detail = "the container was killed (exit status 137)"
        self.last_timings = timings
        return RawRun(results=results_from_output(printed), nonce=layout.nonce, exit_status=exit_status,
                      log_tail=tail(printed), timed_out=timed_out, duration_s=time.monotonic() - started,
                      detail=detail)
