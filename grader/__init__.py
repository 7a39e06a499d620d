"""grader: graded coding exercises, run against isolated untrusted submissions.

This module stays dependency-free: the sandbox copies the `grader` package's `harness` and `confined`
subpackages (and this file) into the container, where only the standard library and pytest exist.
"""

__version__ = "0.13.0"
