"""The lines of a correct solution that no test reaches: what the suites never run, so no mutant there
can be caught but by luck, and a student's mistake there goes unseen.

The lines that ran come from the audit's own gradings of the reference and each correct variant (the
worker records them: grader/confined/worker.py, asked by `grade_bytes(lines=...)`); the lines that could
run are those of the solution's compiled functions, read from their code objects on the host, which
compiles the file and never imports it. A module's or a class's body runs when the file is imported,
whatever the tests do, so only the lines of functions (methods, lambdas, comprehensions) count.
"""

from __future__ import annotations

import inspect
from types import CodeType


def function_lines(source: str, filename: str) -> set[int]:
    """The lines of the functions defined in `source` that hold code (a docstring or a comment does not);
    none when it does not compile."""
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    pending: list[CodeType] = [code]
    while pending:
        current = pending.pop()
        if current.co_flags & inspect.CO_NEWLOCALS:  # a function's frame; a module's or class's body is not
            lines.update(line for _, _, line in current.co_lines() if line is not None)
        pending.extend(const for const in current.co_consts if isinstance(const, CodeType))
    return lines


def unreached(source: str, filename: str, reached: set[int]) -> list[int]:
    """The lines of the functions of `source` that no test ran, in order."""
    return sorted(function_lines(source, filename) - reached)


def spans(lines: list[int]) -> str:
    """`41, 57-59`: sorted line numbers, runs of consecutive ones as ranges."""
    parts: list[str] = []
    start = previous = None
    for line in [*lines, None]:
        if start is not None and previous is not None and line == previous + 1:
            previous = line
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = line
    return ", ".join(parts)
