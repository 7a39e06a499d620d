"""How often one address may do something costly that needs no sign-in (an LTI login writes a row, a
launch may wait on its platform's keys): a token bucket per address, in memory.

`burst` at once, then one more every `per_s` seconds. The addresses are those uvicorn gives (with a
proxy on this machine in front, the client's from its X-Forwarded-For). Kept for at most MAX_ADDRESSES
addresses: past it the buckets that are full again are dropped (they hold nothing a new one would not).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_ADDRESSES = 10_000


@dataclass
class Bucket:
    tokens: float
    at: float


class AddressRate:
    def __init__(self, burst: int, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.per_s, self.clock = burst, per_s, clock
        self.buckets: dict[str, Bucket] = {}

    def wait_s(self, address: str) -> float:
        """0 when `address` may go on now (and its turn is taken); else how long until it may."""
        now = self.clock()
        bucket = self.buckets.get(address)
        if bucket is None:
            if len(self.buckets) >= MAX_ADDRESSES:
                self.prune(now)
            bucket = self.buckets[address] = Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.per_s)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) * self.per_s

    def prune(self, now: float) -> None:
        for address, bucket in list(self.buckets.items()):
            if bucket.tokens + (now - bucket.at) / self.per_s >= self.burst:
                del self.buckets[address]


def seconds_text(seconds: float) -> str:
    whole = max(1, math.ceil(seconds))
    return f"{whole} second{'s' if whole != 1 else ''}"
