"""Unpacking a job inside the sandbox: the host sends one tar on the harness's standard input.

One path for every backend: the Docker backend cannot copy files into a container whose root is
read-only, and the local backend gains the same owners and modes for free. Entries are ours (the
host built them), yet the paths are still checked to stay inside the base folder.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import BinaryIO


def unpack(stream: BinaryIO, base: Path) -> None:
    root = base.resolve()
    can_chown = os.geteuid() == 0
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            target = (root / member.name).resolve()
            if target != root and root not in target.parents:
                raise ValueError(f"job entry {member.name!r} points outside the job folder")
            if member.isdir():
                target.mkdir(exist_ok=True)
            elif member.isfile():
                source = archive.extractfile(member)
                assert source is not None
                with open(target, "wb") as handle:
                    handle.write(source.read())
            else:
                raise ValueError(f"job entry {member.name!r} is neither a file nor a folder")
            os.chmod(target, member.mode)
            if can_chown:
                os.chown(target, member.uid, member.gid)
