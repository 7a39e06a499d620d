"""Unpacking a job inside the sandbox: the host sends one tar on the harness's standard input.

One path for every backend: the Docker backend cannot copy files into a container whose root is
read-only, and the local backend needs no shared folder. Everything is unpacked before any worker
exists, into a folder no worker can write; still, entries must be plain files and folders inside the
base folder, every file is created new (O_EXCL) and nothing is followed (O_NOFOLLOW). The files stay
the harness's own: no owner is changed, and workers get what they need through descriptors.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from pathlib import Path
from typing import BinaryIO


def unpack(stream: BinaryIO, base: Path) -> None:
    root = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                name = posixpath.normpath(member.name)
                parts = [] if name == "." else name.split("/")
                if name.startswith("/") or ".." in parts:
                    raise ValueError(f"job entry {member.name!r} points outside the job folder")
                if member.isdir():
                    if parts:
                        os.mkdir(name, member.mode & 0o755, dir_fd=root)
                    else:
                        os.chmod(root, member.mode & 0o755)
                elif member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, member.mode & 0o644,
                                 dir_fd=root)
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(source.read())
                else:
                    raise ValueError(f"job entry {member.name!r} is neither a file nor a folder")
    finally:
        os.close(root)
