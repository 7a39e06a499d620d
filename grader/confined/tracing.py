"""What of the submission's file runs, for an audit's grading of a correct solution (never a student's):
its lines, and its arcs, each step from one line to the next within one frame.

An arc is (the line before, the line after); a function's entry is (-its first line, the line), its
exit (the line, -its first line), as coverage.py records them. The host reads them as data only, to
tell which way of each branch no test took (grader/audit/coverage.py).

Only the submission's own frames get a local tracer, one small closure each that holds the frame's last
line; the rest cost one call event each. A grading that is not traced installs nothing and pays nothing.
"""

from __future__ import annotations

import opcode
import sys
import threading
from typing import Any

# A frame of a generator, a coroutine or an async generator (inspect's CO_ flags, without importing it
# into every worker) may be a resumed one: its call event is then not the function's entry.
_RESUMABLE = 0x20 | 0x80 | 0x200
_RESUME = opcode.opmap.get("RESUME", -1)  # the instruction a frame starts or resumes at, its argument 0 at a call


def _entered(frame: Any) -> bool:
    """The call event is the function's start, not a generator's or a coroutine's resumption. Unsure,
    say no: the resumed way's arc (from the line it paused on) is only ever one more arc, never one less."""
    code = frame.f_code
    if not code.co_flags & _RESUMABLE:
        return True
    try:
        return bool(code.co_code[frame.f_lasti] == _RESUME and code.co_code[frame.f_lasti + 1] == 0)
    except (IndexError, TypeError):
        return False


class Tracer:
    """Records the lines and arcs of `filename`'s frames that run between `start` and `stop`."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.calls: set[int] = set()  # the lines frames were entered (or resumed) on
        self.arcs: set[tuple[int, int]] = set()

    def start(self) -> None:
        calls, filename = self.calls, self.filename
        add = self.arcs.add  # the lines that ran are the arcs' ends: one set a line event, not two

        def on_call(frame: Any, event: str, arg: Any) -> Any:
            code = frame.f_code
            if code.co_filename != filename:
                return None
            first = code.co_firstlineno
            last = frame.f_lineno
            calls.add(last)  # the `def` line (or where a generator resumes): the function ran
            if _entered(frame):
                last = -first

            def on_event(frame: Any, event: str, arg: Any) -> Any:
                nonlocal last
                if event == "line":
                    line = frame.f_lineno
                    add((last, line))
                    last = line
                elif event == "return":  # a return, an exception leaving, or a yield: the frame is left
                    add((last, -first))
                return on_event

            return on_event

        threading.settrace(on_call)
        sys.settrace(on_call)

    def stop(self, most_lines: int, most_arcs: int) -> tuple[list[int], list[list[int]]]:
        """Stop recording: the lines that ran, sorted, at most `most_lines`; the arcs, at most `most_arcs`."""
        sys.settrace(None)
        threading.settrace(None)
        lines = sorted(self.calls | {line for _, line in self.arcs if line > 0})[:most_lines]
        arcs = [list(arc) for arc in sorted(self.arcs)[:most_arcs]]
        return lines, arcs
