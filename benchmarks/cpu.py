"""CPU accounting the benchmarks share: a cgroup per case, so that each case's figure is the CPU of its
own process tree (and of the containers it caused), never the whole machine's; and cases measured in
alternating rounds, so that a machine whose speed drifts slows every case alike.

Needs write access to the cgroup hierarchy (cgroup v2, or v1's cpuacct controller): run as root.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")


def cgroups_writable() -> bool:
    """Whether this process can make a cgroup of its own to account a case in."""
    root = CGROUPS if (CGROUPS / "cgroup.controllers").exists() else CGROUPS / "cpuacct"
    return root.is_dir() and os.access(root, os.W_OK)


class CpuGroup:
    """A cgroup of the benchmark's own, and the CPU time its processes have used. On cgroup v1 the
    usage of a child cgroup stays counted in its parent after the child is removed, so a container the
    engine placed under it (`cgroup_parent`) is counted even once it is gone."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.v2 = (CGROUPS / "cgroup.controllers").exists()
        self.path = CGROUPS / name if self.v2 else CGROUPS / "cpuacct" / name
        self.path.mkdir()

    @property
    def parent_for_containers(self) -> str:
        """The `cgroup_parent` that places a container under this group (the cgroupfs driver's form)."""
        return f"/{self.name}"

    def used(self) -> float:
        """Seconds of CPU used so far by the processes placed in this group and its children."""
        if not self.v2:
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv`, run by a shell that first moves itself into this group (its children follow)."""
        return ["sh", "-c", f'echo $$ > "{self.path / "cgroup.procs"}" && exec "$@"', "sh", *argv]

    def remove(self, wait_s: float = 10.0) -> None:
        """The group, and the groups of the same name the engine made in v1's other controllers. A
        group is removed only once its last process has ended: processes still ending are waited for."""
        deadline = time.monotonic() + wait_s
        while (self.path / "cgroup.procs").exists() and (self.path / "cgroup.procs").read_text().strip() \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        places = [self.path] if self.v2 else [controller / self.name for controller in CGROUPS.iterdir()]
        for place in places:
            if place.is_dir():
                for child in sorted(place.iterdir(), reverse=True):
                    if child.is_dir():
                        try:
                            child.rmdir()
                        except OSError:
                            pass
                try:
                    place.rmdir()
                except OSError:
                    pass


@dataclass
class Measured:
    """One run of one case: its CPU (the case's own cgroup) and wall seconds."""

    cpu_s: float
    wall_s: float


def run_in_group(name: str, argv: Callable[[CpuGroup], Sequence[str]], cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[Measured, str]:
    """Run `argv(group)` in a new cgroup `name`; its CPU and wall time, and what it printed. `argv`
    sees the group, to hand its `parent_for_containers` to a case that makes containers."""
    group = CpuGroup(name)
    try:
        before = group.used()
        started = time.perf_counter()
        done = subprocess.run(group.command(argv(group)), cwd=cwd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        used = group.used() - before
    finally:
        group.remove()
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Measured(used, wall), done.stdout


@dataclass
class Series:
    """Every run of one case, in the order they were made."""

    name: str
    runs: list[Measured] = field(default_factory=list)

    def median_cpu(self) -> float:
        return statistics.median(run.cpu_s for run in self.runs)

    def median_wall(self) -> float:
        return statistics.median(run.wall_s for run in self.runs)

    def spread_cpu(self) -> str:
        values = [run.cpu_s for run in self.runs]
        return f"{min(values):.3f}-{max(values):.3f}"


def alternate(names: Sequence[str], rounds: int, measure: Callable[[str, int], Measured],
              warm_up: bool = True) -> dict[str, Series]:
    """Each case measured `rounds` times, one of each in turn, the order rotated each round so that no
    case always follows the same one. With `warm_up`, a first round fills the page cache and the
    interpreter's caches and is not counted."""
    series = {name: Series(name) for name in names}
    for number in range(rounds + (1 if warm_up else 0)):
        shift = number % len(names)
        for name in [*names[shift:], *names[:shift]]:
            result = measure(name, number)
            if not warm_up or number > 0:
                series[name].runs.append(result)
    return series


def table(series: dict[str, Series], floor: str, per: int, unit: str = "a submission") -> list[str]:
    """Lines of the figures: each case's median CPU and wall `per` item, and its CPU as a multiple of
    the floor's."""
    base = series[floor].median_cpu()
    lines = []
    width = max(len(name) for name in series)
    for name, found in series.items():
        lines.append(f"  {name:{width}s}  CPU {found.median_cpu() / per:7.3f} s {unit} "
                     f"({found.spread_cpu()} s a run of {per}), {found.median_cpu() / base:5.2f}x the floor, "
                     f"wall {found.median_wall() / per:7.3f} s {unit}")
    return lines
