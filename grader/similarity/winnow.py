"""Winnowing (Schleimer, Wilkerson and Aiken, 2003: the method of MOSS): a document's fingerprints.

Every run of K tokens (a k-gram) is hashed; of each window of W consecutive k-gram hashes the smallest
is kept (the rightmost, when several tie). Two documents that share a run of at least K + W - 1 tokens
are then sure to share a fingerprint, and a document keeps about 2 / (W + 1) of its hashes, so
comparing fingerprints is cheap. Hashes depend on the tokens alone, so the same code gets the same
fingerprints in every file, wherever it sits.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

K = 12        # tokens in a k-gram: about one line of Python (`if v . v + v > v . v :` is 11)
W = 8         # k-grams in a window: a shared run of K + W - 1 = 19 tokens is always found
MODULUS = (1 << 61) - 1
BASE = 1_000_003


@dataclass(frozen=True)
class Fingerprint:
    hash: int
    start: int  # index of the k-gram's first token


def _token_value(text: str, cache: dict[str, int]) -> int:
    value = cache.get(text)
    if value is None:
        value = cache[text] = zlib.crc32(text.encode()) + 1
    return value


def kgram_hashes(tokens: Sequence[str], k: int = K) -> list[int]:
    """The hash of every k-gram, in order: a rolling polynomial hash, the same for the same tokens in
    every run and on every machine (Python's own `hash` of a string changes between runs)."""
    if len(tokens) < k:
        return []
    cache: dict[str, int] = {}
    values = [_token_value(t, cache) for t in tokens]
    top = pow(BASE, k - 1, MODULUS)
    current = 0
    for value in values[:k]:
        current = (current * BASE + value) % MODULUS
    hashes = [current]
    for index in range(k, len(values)):
        current = ((current - values[index - k] * top) * BASE + values[index]) % MODULUS
        hashes.append(current)
    return hashes


def winnow(hashes: Sequence[int], w: int = W) -> list[Fingerprint]:
    """The fingerprints of a document's k-gram hashes: each window's rightmost minimum, once."""
    if not hashes:
        return []
    if len(hashes) <= w:
        low = min(range(len(hashes)), key=lambda i: (hashes[i], -i))
        return [Fingerprint(hashes[low], low)]
    chosen: list[Fingerprint] = []
    last = -1
    for start in range(len(hashes) - w + 1):
        window = range(start, start + w)
        low = min(window, key=lambda i: (hashes[i], -i))
        if low != last:
            chosen.append(Fingerprint(hashes[low], low))
            last = low
    return chosen
