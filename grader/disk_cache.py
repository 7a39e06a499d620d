"""Files the grader keeps between runs, named by a digest of what they were made from: a later run of an
unchanged input reads the file instead of making it again. The cache is the grader's own account's
(`$XDG_CACHE_HOME/grader`, else `~/.cache/grader`), and where it cannot be written nothing is kept."""

from __future__ import annotations

import os
from pathlib import Path


def cache_file(name: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "grader" / name


def read_cached(name: str) -> bytes | None:
    """The kept file's bytes, or None when there is none."""
    try:
        return cache_file(name).read_bytes()
    except OSError:
        return None


def keep(name: str, data: bytes) -> None:
    """Keep `data` under `name`, written whole or not at all (a reader never sees half a file)."""
    path = cache_file(name)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)  # a read-only home folder: made again next time
