"""Files and folders only their owner may read: a stored report, a gradebook, a similarity report.

Kept apart from the store (grader/db/engine.py) so that a command writing such a file without a store,
`grader similarity` on a class folder, needs no extra installed.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def create_private_file(path: Path) -> None:
    """Create `path` with mode 0600 unless it exists (an existing file keeps the mode its owner gave it)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass


def make_private_folder(path: Path) -> Path:
    """Create `path` (and missing parents) owner-only; an existing folder is left as it is."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_FOLDER)
        except FileExistsError:
            continue
        folder.chmod(PRIVATE_FOLDER)  # mkdir's mode is cut by the umask; say it exactly
    return path


def write_private(path: Path, text: str) -> Path:
    """Write a file that only its owner may read (a stored report, a gradebook)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    os.fchmod(descriptor, PRIVATE_FILE)  # a file that was there already keeps its mode otherwise
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
    return path
