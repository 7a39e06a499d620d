"""How a Python of the sandbox is started: the one-line program that finds the grader and calls its entry.

Kept apart from the contract, and to the standard library's `sys` alone, so that the host can start the
harness's interpreter before it has imported anything else (see `grader.sandbox.interpreter`).
"""

from __future__ import annotations

from collections.abc import Sequence


def bootstrap(root: str, module: str, function: str, paths: Sequence[str] = ()) -> str:
    """The `python3 -I -c` program that puts `root` (a folder or zip holding `grader/`) first on the
    path, `paths` last, and calls `module.function()`. -I keeps the environment and the current folder
    out of it; with -S too, `paths` names the site folders (without running their .pth files)."""
    extend = f"sys.path.extend({list(paths)!r}); " if paths else ""
    return (f"import sys; sys.path.insert(0, {root!r}); {extend}"
            f"from {module} import {function}; sys.exit({function}())")
