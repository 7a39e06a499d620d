"""The suites' modules compiled on the host, once, for every harness that runs this very Python.

A grading's harness imports its suites' modules in each lane: pytest rewrites the asserts of the test
files (and conftest.py's) and compiles them, Python compiles the helpers beside them and the reference,
tens of milliseconds a lane before the first test. Where the harness runs the host's own interpreter
and pytest (the local sandbox), the host compiles them here instead, exactly as they would, and ships
them with the job: a module Python imports as its `__pycache__` file (checked against its source's
hash, so a module whose source differs is compiled from the source), the test files' rewritten code
in `contract.BYTECODE_FILE`, which the harness writes where pytest looks once it knows the files' real
place (`grader.harness.bytecode`). Made once per exercise and kept on disk (`disk_cache`), named by a
digest of the sources, of this Python's bytecode version and of pytest's rewriter. Whatever cannot be
compiled here is left out, for the harness to compile (and report) as it always has.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib.util
import marshal
import posixpath
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class SuitesBytecode:
    """What the job carries of its suites' bytecode."""

    files: tuple[tuple[str, bytes], ...]  # (path in the job, a `__pycache__` file's bytes), for Python
    rewritten: bytes  # `contract.BYTECODE_FILE`: {path of a test file: its rewritten code, marshalled}


def suites_bytecode(modules: Iterable[tuple[str, bytes]]) -> SuitesBytecode | None:
    """The bytecode of `modules` ((path in the job, source) pairs), read from the disk cache or compiled
    now; None where pytest cannot be found."""
    sources = sorted(modules)
    rewriter = pytest_rewriter()
    if not sources or not rewriter:
        return None
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER + sys.implementation.cache_tag.encode() + TEST_FILES.encode())
    try:
        for file in rewriter:
            digest.update(file.read_bytes())
    except OSError:
        return None
    for path, source in sources:
        digest.update(f"\0{path}\0{len(source)}\0".encode() + source)
    return _kept_or_made(f"suites-{digest.hexdigest()[:32]}.marshal", tuple(sources))


@functools.lru_cache(maxsize=16)
def _kept_or_made(name: str, sources: tuple[tuple[str, bytes], ...]) -> SuitesBytecode:
    kept = read_cached(name)
    if kept is None:
        kept = marshal.dumps(made(sources))
        keep(name, kept)
    files, rewritten = marshal.loads(kept)
    return SuitesBytecode(tuple(files), rewritten)


def made(sources: Collection[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], bytes]:
    """(the `__pycache__` files of the modules Python imports, the test files' rewritten code) of `sources`."""
    found = compiled(sources)
    files = [(pycache_path(path), pycache_file(source, found[path])) for path, source in sources
             if path in found and not rewritten_by_pytest(path)]
    rewritten = {path: marshal.dumps(code) for path, code in found.items() if rewritten_by_pytest(path)}
    return files, marshal.dumps(rewritten)


def pycache_path(path: str) -> str:
    """Where Python looks for the bytecode of the module at `path` (`importlib.util.cache_from_source`)."""
    folder, name = posixpath.split(path)
    return f"{folder}/__pycache__/{name[:-3]}.{sys.implementation.cache_tag}.pyc"


def pycache_file(source: bytes, code: CodeType) -> bytes:
    """A `__pycache__` file that Python uses only while the source's hash is `source`'s (PEP 552)."""
    checked_hash = (0b11).to_bytes(4, "little")
    return importlib.util.MAGIC_NUMBER + checked_hash + importlib.util.source_hash(source) + marshal.dumps(code)


def compiled(sources: Iterable[tuple[str, bytes]]) -> dict[str, CodeType]:
    """{path: the code the harness's Python would make of the module, or pytest of a file it rewrites (with
    its asserts rewritten)}, compiled from `PLACEHOLDER`'s path."""
    import ast

    from _pytest.assertion.rewrite import rewrite_asserts

    found: dict[str, CodeType] = {}
    for path, source in sources:
        filename = f"{PLACEHOLDER}/{path}"
        try:
            tree = ast.parse(source, filename=filename)
            if rewritten_by_pytest(path):
                rewrite_asserts(tree, source, filename, None)  # the harness's ini asks for no assertion-pass hook
            # Optimisation level 0, the harness's (-I ignores PYTHONOPTIMIZE): asserts kept whatever this
            # process's own level.
            found[path] = compile(tree, filename, "exec", dont_inherit=True, optimize=0)
        except (SyntaxError, ValueError):
            continue  # the harness compiles it and says what is wrong, as it always has
    return found
