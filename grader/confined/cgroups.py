"""A grading's control group: the one count of CPU and memory that no process of the grading can leave.

The kernel charges a cgroup with every CPU second and every page of every process in it, however the
process ends (reaped by a parent, reaped by the kernel because its parent ignores SIGCHLD, killed), at
any nice value, and every page it makes resident whatever its form: its address space, memory files
(memfd) and shared memory, tmpfs files, pipe and socket buffers. Processes forked inside stay inside;
none can move itself out without write access to the hierarchy, which a worker never has.

Two ways to have one, tried in this order (`for_confinement`):

- *own*: where the harness may write the hierarchy (root on a host, cgroup v1 or v2), it makes a group
  for each confinement under its own, puts the confinement's processes in it before they run anything
  of a submission (so everything the confinement starts from then on is in it), limits its memory, and
  removes it at the confinement's end. Its CPU is the confinement's alone (from the move on).
- *shared*: where the hierarchy is read-only (a container: the Docker sandbox's, a course platform's),
  the group the harness itself is in (the container's) is read. Its CPU is the confinement's and that of
  the other processes of the container (the harness, another lane, the grader that started it): all of
  it counts as a grading's, which can only make a limit move less.

What every grading used (`gradings_cpu`), for the time limits' credit (`clock`): with groups of its own,
those of every grading this process can find (its own lanes' and other harnesses', named `PREFIX`...);
in a container, the container's.

Where neither exists (no cgroup file system, or the grader is not root), `None`: see `clock`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field

MOUNTINFO = "/proc/self/mountinfo"
OWN_CGROUPS = "/proc/self/cgroup"
PREFIX = "grader-"
TCP_BUFFERS_BYTES = 64 << 20  # cgroup v1: the TCP buffers of a confinement, counted apart from its memory  # the groups the harness makes: grader-<its pid>-<its start time>-<number>


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy: v2 (`unified`), or v1 with the controllers it carries."""

    mountpoint: str
    root: str  # the cgroup path mounted there (a container sees its own group as its mount's root)
    unified: bool
    controllers: frozenset[str]

    def folder(self, path: str) -> str | None:
        """Where the group at `path` (as /proc/self/cgroup names it) is in this mount, or None."""
        if self.root == "/":
            relative = path
        elif path == self.root:
            relative = ""
        elif path.startswith(self.root + "/"):
            relative = path[len(self.root):]
        else:
            return None
        folder = self.mountpoint.rstrip("/") + (relative if relative != "/" else "")
        return folder if os.path.isdir(folder) else None


def _unescape(text: str) -> str:
    return text.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def hierarchies(mountinfo: str = MOUNTINFO) -> list[Hierarchy]:
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if len(fields) < 5 or len(after) < 3 or after[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(after[2].split(","))
        found.append(Hierarchy(_unescape(fields[4]), _unescape(fields[3]), after[0] == "cgroup2", options))
    return found


def own_groups(cgroup_file: str = OWN_CGROUPS) -> dict[str, str]:
    """This process's group in each hierarchy: "" for v2, each controller's name for v1."""
    groups: dict[str, str] = {}
    try:
        with open(cgroup_file, encoding="utf-8", errors="replace") as file:
            for line in file:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    groups[name] = path
    except (OSError, ValueError):
        pass
    return groups


@dataclass(frozen=True)
class Place:
    """Where a kind of count lives: a group's folder, and whether it is a v2 group."""

    folder: str
    unified: bool


def own_places() -> tuple[Place | None, Place | None]:
    """The folders of this process's own group for CPU and for memory (v2 where it counts them, else
    v1's `cpuacct` and `memory`), each None where no such group can be read."""
    mounts, groups = hierarchies(), own_groups()
    unified = next((m for m in mounts if m.unified), None)
    v2 = unified.folder(groups[""]) if unified is not None and "" in groups else None

    def v1(controller: str) -> Place | None:
        mount = next((m for m in mounts if not m.unified and controller in m.controllers), None)
        if mount is None or controller not in groups:
            return None
        folder = mount.folder(groups[controller])
        return Place(folder, False) if folder is not None else None

    cpu = Place(v2, True) if v2 is not None and os.path.exists(os.path.join(v2, "cpu.stat")) else v1("cpuacct")
    memory = Place(v2, True) if v2 is not None and os.path.exists(os.path.join(v2, "memory.max")) else v1("memory")
    return cpu, memory


def cpu_seconds(place: Place) -> float | None:
    """The CPU every process that was ever in the group has used, children and the ended included."""
    try:
        if place.unified:
            with open(os.path.join(place.folder, "cpu.stat"), "rb") as file:
                for line in file:
                    if line.startswith(b"usage_usec "):
                        return int(line.split()[1]) / 1e6
            return None
        with open(os.path.join(place.folder, "cpuacct.usage"), "rb") as file:
            return int(file.read()) / 1e9
    except (OSError, ValueError):
        return None


def out_of_memory_kills(place: Place) -> int | None:
    """How many processes the kernel has killed in the group for its memory limit."""
    try:
        name = "memory.events" if place.unified else "memory.oom_control"
        with open(os.path.join(place.folder, name), "rb") as file:
            for line in file:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(value)


@dataclass
class OwnGroup:
    """Groups made for one confinement (one for CPU, one for memory: the same folder under v2), which the
    confinement's processes are put in (`join_fds`) before they are asked to run anything of a
    submission."""

    cpu: Place
    memory: Place | None
    memory_limit: int | None = None
    made: list[str] = field(default_factory=list)

    def join_fds(self) -> list[int]:
        """Open `cgroup.procs` of each group, to write the pids of the processes that join it to (one a write;
        "0" for the writer itself)."""
        fds = []
        for folder in dict.fromkeys(p.folder for p in (self.cpu, self.memory) if p is not None):
            fds.append(os.open(os.path.join(folder, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        return fds

    def processes(self) -> list[int]:
        try:
            with open(os.path.join(self.cpu.folder, "cgroup.procs"), "rb") as file:
                return [int(pid) for pid in file.read().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        """End every process in the group, and no other: `cgroup.kill` (v2, Linux 5.14), else each pid it
        lists, again until none is left (a process forking meanwhile is caught at the next pass)."""
        if self.cpu.unified:
            with contextlib.suppress(OSError):
                _write(os.path.join(self.cpu.folder, "cgroup.kill"), "1")
                return
        for pause in _pauses(100):
            pids = self.processes()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(pause)

    def remove(self) -> None:
        """Remove the groups once their processes are gone. One that still holds a process not yet
        reaped (an orphan the harness reaps after the confinement's end) is tried again at this process's
        next group, and by the next harness on the machine once this one has ended (`remove_stale`)."""
        _pending.extend(reversed(self.made))
        self.made = []
        remove_pending(tries=20)


_pending: list[str] = []  # groups of this process that could not be removed yet


def _pauses(count: int) -> list[float]:
    """`count` pauses between looks at processes just killed: short at first (they are usually gone
    within a millisecond), then 5 ms each."""
    return [min(0.005, 0.0005 * 2 ** n) for n in range(count)]


def remove_pending(tries: int = 1) -> None:
    """Remove the groups left to remove, looking up to `tries` times while their last processes end."""
    pauses = _pauses(tries - 1)
    for attempt in range(tries):
        for folder in list(_pending):
            try:
                os.rmdir(folder)
                _pending.remove(folder)
            except FileNotFoundError:
                _pending.remove(folder)
            except OSError:
                pass
        if not _pending or attempt == tries - 1:
            return
        time.sleep(pauses[attempt])


def _own_start_time() -> str:
    try:
        with open("/proc/self/stat", "rb") as file:
            data = file.read()
        return data[data.rindex(b")") + 2:].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return "0"


def _maker_alive(name: str) -> bool:
    """Whether the harness that made the group `name` (grader-PID-START-N) still runs."""
    try:
        _, pid, start, _ = name.split("-", 3)
        with open(f"/proc/{int(pid)}/stat", "rb") as file:
            data = file.read()
        return data[data.rindex(b")") + 2:].split()[19].decode() == start
    except (OSError, ValueError, IndexError):
        return False


def remove_stale(parent: str) -> None:
    """Remove the empty groups whose harness has ended (killed outright before it could)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False) and not _maker_alive(entry.name):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _enable_memory(parent: str) -> bool:
    """v2: whether the memory controller is (or could be) enabled for the children of `parent`."""
    try:
        with open(os.path.join(parent, "cgroup.subtree_control"), encoding="ascii") as file:
            if "memory" in file.read().split():
                return True
        _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
        return True
    except OSError:
        return False


_counter = iter(range(1, 1 << 62))


def make_own(memory_bytes: int) -> OwnGroup | None:
    """New groups for a confinement under this process's own, the memory one limited to `memory_bytes`
    (memory and swap); None where the hierarchy cannot be written here (then see `shared`)."""
    if os.geteuid() != 0:
        return None
    cpu_place, memory_place = own_places()
    if cpu_place is None:
        return None
    remove_pending()
    name = f"{PREFIX}{os.getpid()}-{_own_start_time()}-{next(_counter)}"
    made: list[str] = []
    try:
        remove_stale(cpu_place.folder)
        cpu_folder = os.path.join(cpu_place.folder, name)
        os.mkdir(cpu_folder, 0o755)
        made.append(cpu_folder)
        group = OwnGroup(Place(cpu_folder, cpu_place.unified), None, made=made)
    except OSError:
        for folder in made:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        return None
    if memory_place is not None:
        with contextlib.suppress(OSError):
            group.memory = _limited(memory_place, name, memory_bytes, group)
    return group


def _limited(parent: Place, name: str, limit: int, group: OwnGroup) -> Place | None:
    if parent.unified:
        if parent.folder != group.cpu.folder.rsplit("/", 1)[0] or not _enable_memory(parent.folder):
            return None
        folder = group.cpu.folder  # v2: one group counts both
        _write(os.path.join(folder, "memory.max"), str(limit))
        with contextlib.suppress(OSError):
            _write(os.path.join(folder, "memory.swap.max"), "0")
        group.memory_limit = limit
        return Place(folder, True)
    if parent.folder != group.cpu.folder.rsplit("/", 1)[0]:
        remove_stale(parent.folder)
    folder = os.path.join(parent.folder, name)
    if folder != group.cpu.folder:
        os.mkdir(folder, 0o755)
        group.made.append(folder)
    _write(os.path.join(folder, "memory.limit_in_bytes"), str(limit))
    with contextlib.suppress(OSError):  # swap accounting may be off: then no swap is counted apart
        _write(os.path.join(folder, "memory.memsw.limit_in_bytes"), str(limit))
    with contextlib.suppress(OSError):
        # v1 counts TCP buffers apart from the rest, and only once they are limited (v2 counts them in
        # memory.max): workers open no TCP socket unless an exercise allows them (`Limits.sockets`).
        _write(os.path.join(folder, "memory.kmem.tcp.limit_in_bytes"), str(min(limit, TCP_BUFFERS_BYTES)))
    group.memory_limit = limit
    return Place(folder, False)


SCAN_DEPTH = 3  # how deep below a hierarchy's root the groups of other gradings are looked for
SCAN_ENTRIES = 4000  # folders looked at, at most, in one reading


@dataclass
class _Scan:
    roots: list[str]
    unified: bool


_scan: _Scan | None = None


def _scan_roots() -> _Scan | None:
    """Where the groups of gradings are looked for: this process's own group (where it makes its own), and
    the hierarchy's root down to `SCAN_DEPTH` (where other harnesses make theirs). Found once a process."""
    global _scan
    if _scan is None:
        place, _ = own_places()
        if place is None:
            return None
        mount = next((m for m in hierarchies() if m.unified == place.unified
                      and (m.unified or "cpuacct" in m.controllers) and place.folder.startswith(m.mountpoint)), None)
        roots = [place.folder] + ([mount.mountpoint] if mount is not None and mount.mountpoint != place.folder else [])
        _scan = _Scan(roots, place.unified)
    return _scan


_last: tuple[float, dict[str, float]] | None = None  # the latest reading, and when it was taken


def gradings_cpu(max_age: float = 0.0) -> dict[str, float] | None:
    """The CPU that the groups of every grading this process can find have used so far, by folder: the
    groups harnesses make (`PREFIX`), this grading's every lane among them. None where none can be read.
    A reading at most `max_age` seconds old does, for a count's start (`clock.GroupCPU`): an earlier
    start only counts more of the gradings' CPU (each reading costs a read of every group's counters)."""
    global _last
    if _last is not None and time.monotonic() - _last[0] <= max_age:
        return dict(_last[1])
    scan = _scan_roots()
    if scan is None:
        return None
    found: dict[str, float] = {}
    budget = [SCAN_ENTRIES]

    def visit(folder: str, depth: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if budget[0] <= 0:
                return
            budget[0] -= 1
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if entry.name.startswith(PREFIX):
                if entry.path not in found:
                    used = cpu_seconds(Place(entry.path, scan.unified))
                    if used is not None:
                        found[entry.path] = used
            elif depth > 1:
                visit(entry.path, depth - 1)

    for root in scan.roots:
        visit(root, 1 if root == scan.roots[0] and len(scan.roots) > 1 else SCAN_DEPTH)
    _last = (time.monotonic(), dict(found))
    return found


def shared() -> Place | None:
    """The group this process is in, read-only (a container's own), for its CPU; None where there is
    none to read, or it is the machine's root group (which counts every process of the machine)."""
    cpu_place, _ = own_places()
    if cpu_place is None or machine_root(cpu_place):
        return None
    return cpu_place if cpu_seconds(cpu_place) is not None else None


def machine_root(place: Place) -> bool:
    """Whether the group is the machine's root group. Under v2 only the true root has no `cgroup.type`
    (a container's namespace shows its own group as `/`, with one); under v1 a container's mount has
    its group as the mount's root."""
    if place.unified:
        return not os.path.exists(os.path.join(place.folder, "cgroup.type"))
    mount = next((m for m in hierarchies() if not m.unified and "cpuacct" in m.controllers), None)
    return own_groups().get("cpuacct") == "/" and (mount is None or mount.root == "/")


