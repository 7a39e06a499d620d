"""The command line's console: rich's, made safe for what it shows and for a reader that leaves.

Whatever is printed, `PipedConsole` shows every control character escaped (`\x1b`, `\x07`): a window
title, the clipboard (OSC 52) or a cleared screen in a message is text on the instructor's terminal,
never a command to it. Every command starts one, so this module imports rich's console alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

UNBOUNDED_WIDTH = 200
# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides that make text
# read other than it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def escaped(text: str) -> str:
    """`text` with every control character written out as its escape (`\x1b`, `\u202e`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


class PipedConsole(Console):
    """A console whose reader may leave (`grader ... | head`): rich's default then ends the program with
    exit status 1, which `grade` keeps for "cannot vouch for a result"; this one raises BrokenPipeError
    for the command line to end as a writer killed by SIGPIPE would. Written to a file or a pipe rather
    than a terminal, its lines are as wide as a summary needs (rich would fold them at 80 columns), unless
    COLUMNS says otherwise."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not self.is_terminal and "width" not in options and "COLUMNS" not in os.environ:
            self.width = UNBOUNDED_WIDTH

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        # Every piece of text rich draws passes here (tables render their cells through it too); its own
        # control segments (cursor moves of a progress bar) are kept, the text's controls are escaped.
        for segment in super().render(renderable, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(escaped(segment.text), segment.style)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output went away")
