"""What the fork servers (the zygote, the harness template) share: noticing their children's ends.

Kept to the standard library's lightest modules: the zygote imports it on every grading.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator


class ChildWatch:
    """A pipe that becomes readable whenever a child of this process ends (SIGCHLD, through
    `signal.set_wakeup_fd`), for a fork server's `select` loop."""

    def __init__(self) -> None:
        self.fd, self._write = os.pipe()
        os.set_blocking(self._write, False)
        signal.set_wakeup_fd(self._write)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def ended(self) -> Iterator[tuple[int, int]]:
        """(pid, exit code as `Popen.returncode`) of each child that has ended since, reaped."""
        os.read(self.fd, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            yield pid, os.waitstatus_to_exitcode(status)

    def forget(self) -> None:
        """In a forked child: leave the signal as it was and close the pipe."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.fd)
        os.close(self._write)
