"""The suites' modules compiled on the host, once, for every harness that runs this very Python.

A grading's harness imports its suites' modules in each lane: pytest rewrites the asserts of the test
files (and conftest.py's) and compiles them, Python compiles the helpers beside them and the reference,
tens of milliseconds a lane before the first test. Where the harness runs the host's own interpreter
and pytest (the local sandbox), the host compiles them here instead, exactly as they would, and ships
the code with the job (`contract.BYTECODE_FILE`); the harness writes it where pytest and Python look
first (`grader.harness.bytecode`). The code is made once per exercise and kept on disk (`disk_cache`),
named by a digest of the sources, of this Python's bytecode version and of pytest's rewriter: a later
grading reads it. Whatever cannot be compiled here is left out, for the harness to compile (and report)
as it always has.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib.util
import marshal
import posixpath
from collections.abc import Iterable
from pathlib import Path
from types import CodeType

from grader.disk_cache import keep, read_cached
from grader.harness.contract import TEST_FILES

# The path the code is compiled under: the harness names each module's code after its real place.
PLACEHOLDER = "/grader-job"


def pytest_rewriter() -> list[Path]:
    """The files of pytest that decide how it rewrites a test file (found without importing pytest)."""
    spec = importlib.util.find_spec("_pytest")
    if spec is None or not spec.submodule_search_locations:
        return []
    package = Path(next(iter(spec.submodule_search_locations)))
    return [package / "_version.py", package / "assertion" / "rewrite.py"]


def rewritten_by_pytest(path: str) -> bool:
    name = posixpath.basename(path)
    return name == "conftest.py" or fnmatch.fnmatch(name, TEST_FILES)


def suites_bytecode(modules: Iterable[tuple[str, bytes]]) -> bytes | None:
    """The marshalled code of `modules` ((path in the job, source) pairs), read from the disk cache or
    compiled now; None where pytest cannot be found."""
    sources = sorted(modules)
    rewriter = pytest_rewriter()
    if not sources or not rewriter:
        return None
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER + TEST_FILES.encode())
    try:
        for file in rewriter:
            digest.update(file.read_bytes())
    except OSError:
        return None
    for path, source in sources:
        digest.update(f"\0{path}\0{len(source)}\0".encode() + source)
    return _kept_or_made(f"suites-{digest.hexdigest()[:32]}.marshal", tuple(sources))


@functools.lru_cache(maxsize=16)
def _kept_or_made(name: str, sources: tuple[tuple[str, bytes], ...]) -> bytes:
    kept = read_cached(name)
    if kept is not None:
        return kept
    made = marshal.dumps(compiled(sources))
    keep(name, made)
    return made


def compiled(sources: Iterable[tuple[str, bytes]]) -> dict[str, tuple[CodeType | None, CodeType | None]]:
    """{path: (the module's code, its code with pytest's asserts for a file pytest rewrites)}: what the
    harness's Python and pytest would make of each, each compiled from `PLACEHOLDER`'s path."""
    import ast

    from _pytest.assertion.rewrite import rewrite_asserts

    found: dict[str, tuple[CodeType | None, CodeType | None]] = {}
    for path, source in sources:
        filename = f"{PLACEHOLDER}/{path}"
        try:
            # Optimisation level 0, the harness's (-I ignores PYTHONOPTIMIZE): asserts kept whatever this process's.
            plain = compile(source, filename, "exec", dont_inherit=True, optimize=0)
            rewritten = None
            if rewritten_by_pytest(path):
                tree = ast.parse(source, filename=filename)
                rewrite_asserts(tree, source, filename, None)  # the harness's ini asks for no assertion-pass hook
                rewritten = compile(tree, filename, "exec", dont_inherit=True, optimize=0)
        except (SyntaxError, ValueError):
            continue  # the harness compiles it and says what is wrong, as it always has
        found[path] = (plain, rewritten)
    return found
