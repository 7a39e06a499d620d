"""The suites' bytecode, put where pytest and Python look for it before they compile a module.

A harness that runs the host's own Python gets its suites' modules compiled by the host
(`contract.BYTECODE_FILE`, made once for the exercise: see `grader.sandbox.bytecode`), so that each lane
of each grading does not compile them again (pytest rewrites a test file's asserts, Python compiles the
helpers beside them: tens of milliseconds a lane). Each module's code is written into its folder's
`__pycache__`, as pytest and Python would have written it themselves: the rewritten code under pytest's
name for it, with the header pytest checks (the source's modification time and size), the plain code under
Python's, checked against the source's hash. Written before anything of the suites is imported, in the
job's own folder, where no worker reaches; a source that does not match its code is simply compiled.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from types import CodeType

from _pytest.assertion.rewrite import PYC_TAIL

from grader.harness.contract import BYTECODE_FILE

PYTHON_TAIL = f".{sys.implementation.cache_tag}.pyc"
CHECKED_HASH = (0b11).to_bytes(4, "little")  # a pyc that Python uses only while its source's hash matches


def install_bytecode(base: str) -> None:
    """Write the job's compiled modules (if it has them) beside their sources, under `base`."""
    try:
        with open(os.path.join(base, BYTECODE_FILE), "rb") as file:
            compiled = marshal.load(file)
    except FileNotFoundError:
        return
    for relative, (plain, rewritten) in compiled.items():
        source = os.path.join(base, relative)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        os.makedirs(cache, 0o700, exist_ok=True)
        stem = os.path.basename(source)[:-3]
        with open(source, "rb") as file:
            data = file.read()
        if plain is not None:
            header = importlib.util.MAGIC_NUMBER + CHECKED_HASH + importlib.util.source_hash(data)
            _write(os.path.join(cache, stem + PYTHON_TAIL), header + marshal.dumps(plain))
        if rewritten is not None:
            # pytest runs its pyc as it is: the code must name the source where it is now, as pytest's own would.
            stat = os.stat(source)
            header = (importlib.util.MAGIC_NUMBER + bytes(4) + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                      + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
            _write(os.path.join(cache, stem + PYC_TAIL), header + marshal.dumps(named(rewritten, source)))


def named(code: CodeType, path: str) -> CodeType:
    """`code`, and every function and class body in it, as compiled from the file `path`."""
    constants = tuple(named(constant, path) if isinstance(constant, CodeType) else constant
                      for constant in code.co_consts)
    return code.replace(co_filename=path, co_consts=constants)


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
