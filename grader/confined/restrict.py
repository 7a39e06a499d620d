"""Restrictions a process puts on itself and on everything it starts, with the standard library alone:
a seccomp filter (which syscalls it is refused) and, where the kernel offers it, a Landlock domain
(which files it may read and write, no TCP, no signal or abstract socket beyond its own processes).

The namespaced sandbox hands the filter to bubblewrap (`seccomp_program`). Inside a container someone
else started (`contract` isolation "account"), where no namespace can be made, the zygote installs
both on itself before it serves (`confine_self`): Docker's default seccomp profile lets a process add
a filter of its own and make a Landlock domain, since neither can widen what it may do. Both need
`no_new_privs`, which also keeps a worker from gaining privileges through a set-uid program.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Refused to every worker (EPERM): tracing or reading another process (ptrace, process_vm_readv/writev,
# pidfd_getfd); System V shared memory, semaphores and message queues, whose objects outlive the
# process that made them with no size a worker's limits bound (POSIX shared memory lives in a sized
# /dev/shm instead); and memory files (memfd_create), whose pages no address-space limit counts.
# Per architecture (`uname -m`): (AUDIT_ARCH_*, numbers).
REFUSED: dict[str, tuple[int, tuple[int, ...]]] = {
    "x86_64": (0xC000003E, (101, 310, 311, 438, 29, 64, 68, 319)),
    "aarch64": (0xC00000B7, (117, 270, 271, 438, 194, 190, 186, 279)),
}
# Refused as well where the worker has no network namespace: io_uring (a second way into the kernel that
# seccomp cannot see into), and socket() of any family but AF_UNIX (no TCP, UDP, raw or netlink socket).
NO_NETWORK: dict[str, dict[str, Any]] = {
    "x86_64": {"socket": 41, "io_uring": (425, 426, 427)},
    "aarch64": {"socket": 198, "io_uring": (425, 426, 427)},
}
AF_UNIX = 1
_X32_SYSCALLS = 0x40000000  # on x86_64, the x32 ABI's syscalls share the architecture: all refused
_LOAD, _EQUAL, _AT_LEAST, _RETURN = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
_ALLOW, _EPERM, _EACCES = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 13  # SECCOMP_RET_ALLOW, RET_ERRNO|errno
_ARCH_OFFSET, _NUMBER_OFFSET, _FIRST_ARGUMENT = 4, 0, 16  # in struct seccomp_data (the low half, little-endian)


def seccomp_program(machine: str | None = None, network: bool = True) -> bytes | None:
    """The classic BPF program of `REFUSED` for this machine (and, without `network`, of `NO_NETWORK`),
    or None where it has no numbers. A syscall of another architecture (32-bit calls on a 64-bit
    kernel) is refused as a whole."""
    machine = machine or platform.machine()
    if machine not in REFUSED or (not network and machine not in NO_NETWORK):
        return None
    arch, refused = REFUSED[machine]
    steps: list[_Step | str] = [_Step(_LOAD, _ARCH_OFFSET), _Step(_EQUAL, arch, if_not="refuse"),
                                _Step(_LOAD, _NUMBER_OFFSET)]
    if arch == 0xC000003E:
        steps.append(_Step(_AT_LEAST, _X32_SYSCALLS, "refuse"))
    steps += [_Step(_EQUAL, number, "refuse") for number in refused]
    if not network:
        steps += [_Step(_EQUAL, number, "refuse") for number in NO_NETWORK[machine]["io_uring"]]
        steps.append(_Step(_EQUAL, NO_NETWORK[machine]["socket"], "socket"))
    steps.append(_Step(_RETURN, _ALLOW))
    if not network:  # socket(): its first argument, the family, must be AF_UNIX
        steps += ["socket", _Step(_LOAD, _FIRST_ARGUMENT), _Step(_EQUAL, AF_UNIX, if_not="no socket"),
                  _Step(_RETURN, _ALLOW), "no socket", _Step(_RETURN, _EACCES)]
    steps += ["refuse", _Step(_RETURN, _EPERM)]
    return _assemble(steps)


@dataclass(frozen=True)
class _Step:
    """One BPF instruction; a conditional jump names the label it goes to when it holds (`then`) or
    when it does not (`if_not`), else it goes on with the next instruction."""

    code: int
    value: int
    then: str | None = None
    if_not: str | None = None


def _assemble(steps: list[_Step | str]) -> bytes:
    """The program's bytes, labels (the strings among `steps`) turned into jump offsets."""
    labels: dict[str, int] = {}
    instructions: list[_Step] = []
    for step in steps:
        if isinstance(step, str):
            labels[step] = len(instructions)
        else:
            instructions.append(step)

    def offset(label: str | None, index: int) -> int:
        return 0 if label is None else labels[label] - index - 1

    return b"".join(struct.pack("=HBBI", step.code, offset(step.then, index), offset(step.if_not, index), step.value)
                    for index, step in enumerate(instructions))


# -- installing it on oneself ----------------------------------------------------------------------

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # the same on every arch
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
# Landlock's file system rights, by the ABI version that added them.
_FS_RIGHTS = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights that apply to a file, not a folder
READ = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class RestrictionFailed(Exception):
    """A restriction that should hold could not be put in place: nothing may run without it."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        raise RestrictionFailed(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def no_new_privileges() -> None:
    """Neither this process nor anything it starts gains privileges again (a set-uid program included)."""
    _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                         ctypes.c_ulong(0)), "prctl(PR_SET_NO_NEW_PRIVS)")


def install_seccomp(program: bytes) -> None:
    """Install the filter on this process (and everything it starts, for good)."""

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    no_new_privileges()
    _check(_libc().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                         ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl(PR_SET_SECCOMP)")


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none, or refused by the container's seccomp profile)."""
    version: int = _libc().syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, version)


@dataclass(frozen=True)
class Paths:
    """What a restricted process may reach: `read` (and execute) beneath these, `write` (everything)
    beneath those, and the devices of `devices` read and written (/dev/null and the like)."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    devices: tuple[str, ...] = ("/dev",)


def landlock(paths: Paths, abi: int, network: bool = False) -> None:
    """Make this process a Landlock domain of its own: files as `paths` allow, no TCP bind or connect
    (ABI 4; unless `network`), no signal or abstract Unix socket to a process outside the domain (ABI 6)."""
    handled_fs = sum(rights for version, rights in _FS_RIGHTS.items() if version <= abi)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    fields = [handled_fs] + ([handled_net] if abi >= 4 else []) + ([scoped] if abi >= 6 else [])
    attr = ctypes.create_string_buffer(struct.pack(f"={len(fields)}Q", *fields))
    libc = _libc()
    ruleset = _check(libc.syscall(LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr.raw)), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    try:
        rules = [(path, READ) for path in paths.read]
        rules += [(path, READ | WRITE_FILE | TRUNCATE | IOCTL_DEV) for path in paths.devices]
        rules += [(path, handled_fs) for path in paths.write]
        for path, wanted in rules:
            _add_rule(libc, ruleset, path, wanted & handled_fs)
        no_new_privileges()
        _check(libc.syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # nothing there: nothing to allow
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= FILE_RIGHTS
        beneath = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))  # packed, as the kernel's struct is
        _check(libc.syscall(LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                            beneath, ctypes.c_uint32(0)), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc")


def python_paths() -> tuple[str, ...]:
    """Where this interpreter and its standard library live (they may lie outside /usr)."""
    return tuple(sorted({os.path.dirname(os.path.realpath(sys.executable)), sys.prefix, sys.base_prefix,
                         sys.exec_prefix, sys.base_exec_prefix}))


@dataclass(frozen=True)
class Confined:
    """What `confine_self` put in place, for the grading's record."""

    landlock_abi: int
    seccomp: bool

    def describe(self) -> str:
        filters = "seccomp (no network)" if self.seccomp else "no seccomp filter"
        files = f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock (the kernel offers none)"
        return f"{filters}, {files}"


def confine_self(read: Iterable[str], write: Iterable[str], network: bool = False) -> Confined:
    """Restrict this process and everything it starts: Landlock (where offered) to read the system and
    `read`, write only beneath `write`; then the seccomp filter, without network sockets unless `network`.
    Raises RestrictionFailed when the filter cannot be installed: the caller must not go on."""
    abi = landlock_abi()
    if abi:
        landlock(Paths(read=(*SYSTEM_READ, *python_paths(), *read), write=tuple(write)), abi, network)
    program = seccomp_program(network=network)
    if program is None:
        raise RestrictionFailed(f"no seccomp filter is known for this machine ({platform.machine()})")
    install_seccomp(program)
    return Confined(abi, True)
