"""Allocates memory without end while being imported.
expect: failed, crashed

The import ends with MemoryError (address-space limit) or an out-of-memory kill (cgroup limit);
either way no test can pass and the host must not feel it.
"""

CHUNK = b"\x01" * (16 << 20)  # 16 MiB of written memory
_hoard = bytearray()
while True:
    _hoard += CHUNK


class Req:  # never reached
    pass


class Scheduler:  # never reached
    pass
