"""The platforms' key sets (JWKS), fetched off the request path and kept for their lifetime.

A launch's id_token is checked against its platform's public keys, which the platform serves at its
keyset URL. Fetching them for each launch would let a slow LMS hold every request thread of the service
(60 launches waiting on a key set that answers in 12 s starved every other page), so here:

- one fetch per key set at a time: launches that need it meanwhile wait for that fetch, on the event loop,
  holding no thread (the fetch itself takes one of FETCH_THREADS of its own, none of the pages');
- a fetch has FETCH_TIMEOUT_S to connect and as long for its body, of at most MAX_BYTES;
- a key set is kept as long as its Cache-Control says (within MIN_KEEP_S..MAX_KEEP_S; DEFAULT_KEEP_S when
  it says nothing); a key id it does not hold fetches it again at most every REFETCH_S (a platform that
  rotated its keys), so made-up key ids cost the platform nothing;
- a fetch that failed is remembered FAILURE_KEEP_S, so a broken LMS is not asked again for every launch;
- at most MAX_WAITING launches wait for fetches at once, so that they never take every request's place;
- what is wrong with a key set is a KeySetError naming it (unreachable, slow, too large, not JSON, no
  usable key), which the launch page shows with status 502: the platform's fault, never the tool's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt

log = logging.getLogger("grader.lti")

FETCH_TIMEOUT_S = 5.0  # to connect, then for the whole body (a read started in time ends within it again)
MAX_BYTES = 256 * 1024  # a key set of a few keys is a few KiB
MAX_KEYS = 50
DEFAULT_KEEP_S = 600.0
MIN_KEEP_S = 60.0
MAX_KEEP_S = 86400.0
REFETCH_S = 30.0
FAILURE_KEEP_S = 10.0
FETCH_THREADS = 4  # key sets of different platforms fetched at once
# Launches that may wait for fetches at once: each is a request under way, and the service takes 200
# (grader.web.connections.MAX_REQUESTS); past this a launch is told to come back (503), the pages keep the rest.
MAX_WAITING = 60
ALGORITHMS = ("RS256", "RS384", "RS512")


class KeySetError(Exception):
    """What is wrong with a platform's key set, in a title and a sentence (the page's)."""

    def __init__(self, title: str, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.title, self.message, self.status = title, message, status


@dataclass(frozen=True)
class Fetched:
    body: bytes
    max_age: float | None  # what Cache-Control allows, None when it says nothing


def fetch(url: str) -> Fetched:
    """The key set's bytes (at most MAX_BYTES) and its lifetime; KeySetError when it cannot be had."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    deadline = time.monotonic() + FETCH_TIMEOUT_S
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as answer:
            declared = answer.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MAX_BYTES:
                raise too_large(url)
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise too_slow(url)
                chunk = answer.read(16 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BYTES:
                    raise too_large(url)
                chunks.append(chunk)
            return Fetched(b"".join(chunks), max_age(answer.headers.get("Cache-Control", "")))
    except urllib.error.HTTPError as exc:
        raise KeySetError("Platform keys unavailable", f"The platform's key set at {url} answered {exc.code} "
                                                       f"{exc.reason}: the platform's keyset URL is wrong or its "
                                                       "service is down.") from None
    except TimeoutError:
        raise too_slow(url) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise too_slow(url) from None
        raise KeySetError("Platform keys unavailable", f"The platform's key set at {url} could not be fetched "
                                                       f"({reason}): the platform is unreachable from this "
                                                       "service.") from None


def too_large(url: str) -> KeySetError:
    return KeySetError("Platform keys too large", f"The platform's key set at {url} is over {MAX_BYTES // 1024} "
                                                  "KiB: no platform's keys take that much, so it was not read.")


def too_slow(url: str) -> KeySetError:
    return KeySetError("Platform keys too slow", f"The platform's key set at {url} did not arrive within "
                                                 f"{FETCH_TIMEOUT_S:g} s: the platform is slow or overloaded. "
                                                 "Try the launch again in a moment.")


def max_age(cache_control: str) -> float | None:
    directives = cache_control.lower()
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    found = re.search(r"max-age\s*=\s*\"?(\d{1,10})", directives)
    return float(found.group(1)) if found else None


def parse(url: str, body: bytes) -> dict[str, jwt.PyJWK]:
    """The signing keys of a key set, by key id; KeySetError when it holds none this tool can use."""
    try:
        document = json.loads(body)
    except ValueError:
        raise KeySetError("Platform keys malformed", f"The platform's key set at {url} is not JSON: its keyset "
                                                     "URL may lead to another page.") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise KeySetError("Platform keys malformed", f"The platform's key set at {url} has no list of keys "
                                                     "(a JWKS is {\"keys\": [...]}).")
    usable: dict[str, jwt.PyJWK] = {}
    for entry in keys[:MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") != "RSA":
            continue
        try:
            key = jwt.PyJWK(entry, algorithm=str(entry.get("alg") or "RS256"))
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        if key.algorithm_name in ALGORITHMS:
            usable[str(entry.get("kid", ""))] = key
    if not usable:
        said = "is empty" if not keys else f"holds {len(keys)} key(s), none an RSA signing key this tool can use"
        raise KeySetError("Platform has no usable keys", f"The platform's key set at {url} {said}: no launch from "
                                                         "it can be checked until the platform publishes its keys.")
    return usable


@dataclass
class Kept:
    keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    fetched_at: float = 0.0  # monotonic
    good_until: float = 0.0
    failure: KeySetError | None = None


class KeySets:
    """The key sets of one service, by URL. `signing_key` is awaited by the launch on the event loop; the
    fetches run in a few threads of their own, never in the pages' pool."""

    def __init__(self, fetcher: Callable[[str], Fetched] = fetch, clock: Callable[[], float] = time.monotonic) -> None:
        self.fetcher, self.clock = fetcher, clock
        self.kept: dict[str, Kept] = {}
        self.fetching: dict[str, concurrent.futures.Future[Kept]] = {}
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="lti-keys")
        self.fetches = 0
        self.waiting = 0  # launches waiting for a fetch (on the event loop: counted without a lock)

    async def signing_key(self, url: str, kid: str) -> jwt.PyJWK:
        """The key `kid` of the key set at `url`; KeySetError for a key set that cannot be used, LookupError
        for a key id it does not hold."""
        now = self.clock()
        with self.lock:
            kept = self.kept.get(url)
        if kept is None or now >= kept.good_until or (kid not in kept.keys and kept.failure is None
                                                      and now - kept.fetched_at >= REFETCH_S):
            if self.waiting >= MAX_WAITING:
                raise KeySetError("Platform keys being fetched", f"{self.waiting} launches wait for the platform's "
                                                                 "keys already: try again in a few seconds.", 503)
            self.waiting += 1
            try:
                # Shielded: a launch that gives up (its client gone) leaves the fetch to the others.
                kept = await asyncio.shield(asyncio.wrap_future(self.refresh(url)))
            finally:
                self.waiting -= 1
        if kept.failure is not None:
            raise kept.failure
        if kid not in kept.keys:
            if not kid and len(kept.keys) == 1:
                return next(iter(kept.keys.values()))  # a token without a key id, from a platform with one key
            raise LookupError(kid)
        return kept.keys[kid]

    def refresh(self, url: str) -> concurrent.futures.Future[Kept]:
        """The fetch of the key set under way, started if none is: every launch that needs it waits for it."""
        with self.lock:
            running = self.fetching.get(url)
            if running is None:
                running = self.fetching[url] = self.pool.submit(self.fetched, url)
                self.fetches += 1
                log.info("fetching the key set %s (fetch %d of this service)", url, self.fetches)
            return running

    def fetched(self, url: str) -> Kept:
        try:
            got = self.fetcher(url)
            keys = parse(url, got.body)
        except KeySetError as exc:
            now = self.clock()
            kept = Kept(failure=exc, fetched_at=now, good_until=now + FAILURE_KEEP_S)
        except Exception as exc:  # a bug here is still the key set's failure, said, never a 500 for every launch
            now = self.clock()
            kept = Kept(failure=KeySetError("Platform keys unavailable", f"The platform's key set at {url} could "
                                                                         f"not be read: {exc}."),
                        fetched_at=now, good_until=now + FAILURE_KEEP_S)
        else:
            now = self.clock()
            keep = DEFAULT_KEEP_S if got.max_age is None else min(MAX_KEEP_S, max(MIN_KEEP_S, got.max_age))
            kept = Kept(keys=keys, fetched_at=now, good_until=now + keep)
        if kept.failure is not None:
            log.warning("key set %s not usable: %s", url, kept.failure.message)
        with self.lock:
            self.kept[url] = kept
            self.fetching.pop(url, None)
        return kept


_key_sets: weakref.WeakKeyDictionary[Any, KeySets] = weakref.WeakKeyDictionary()


def key_sets_of(owner: Any) -> KeySets:
    """The key sets of a service (`owner`: its store), made on first use and gone with it."""
    found = _key_sets.get(owner)
    if found is None:
        found = _key_sets[owner] = KeySets()
    return found
