"""The suites' rewritten test files, put where pytest looks for them before it rewrites a file itself.

A harness that runs the host's own Python gets its suites' modules compiled by the host (see
`grader.sandbox.bytecode`): the modules Python imports come as their `__pycache__` files, and the test
files, whose asserts pytest rewrites, as code in `contract.BYTECODE_FILE`. Each test file's code is
written here into its folder's `__pycache__` as pytest would have written it, under pytest's name for
it, with the header pytest checks (the source's modification time and size) and named after the file's
real place (the host compiled it before it knew the job's folder). Written before anything of the
suites is imported, in the job's own folder, where no worker reaches; a source that does not match its
code is simply compiled.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
from types import CodeType

from _pytest.assertion.rewrite import PYC_TAIL

from grader.harness.contract import BYTECODE_FILE


def install_bytecode(base: str) -> None:
    """Write the job's rewritten test files (if it has them) beside their sources, under `base`."""
    try:
        with open(os.path.join(base, BYTECODE_FILE), "rb") as file:
            rewritten = marshal.load(file)
    except FileNotFoundError:
        return
    for relative, code in rewritten.items():
        source = os.path.join(base, relative)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        os.makedirs(cache, 0o700, exist_ok=True)
        stat = os.stat(source)
        header = (importlib.util.MAGIC_NUMBER + bytes(4) + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                  + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        # pytest runs its pyc as it is: the code must name the source where it is now, as pytest's own would.
        code = named(marshal.loads(code), source)
        with os.fdopen(os.open(os.path.join(cache, os.path.basename(source)[:-3] + PYC_TAIL),
                               os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "wb") as file:
            file.write(header + marshal.dumps(code))


def named(code: CodeType, path: str) -> CodeType:
    """`code`, and every function and class body in it, as compiled from the file `path`."""
    constants = tuple(named(constant, path) if isinstance(constant, CodeType) else constant
                      for constant in code.co_consts)
    return code.replace(co_filename=path, co_consts=constants)
