"""Crashes the interpreter with a segmentation fault while being imported.
expect: crashed

The worker dies by SIGSEGV before it can say it is ready.
"""

import os
import signal

try:
    import ctypes
    ctypes.string_at(0)  # read address 0
except ImportError:
    pass
os.kill(os.getpid(), signal.SIGSEGV)  # fall-back without ctypes


class Req:  # never reached
    pass


class Scheduler:  # never reached
    pass
