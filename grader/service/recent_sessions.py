"""The sessions this process verified recently, to know who submits while the store is away.

Every page reads its session from the store; when the store cannot be reached, a submission would be
refused for want of knowing whose it is, and the spool (grader.service.spool) could not keep it. So the
web service remembers the sessions it verified in the last minutes, and the submit route alone falls
back on them, and only while the store is unreachable.

Why it is sound: a session ends by signing out, by its link being revoked or by expiring. Signing out
and revoking write to the store, so neither can happen while the store is away; those done by this
process also forget the session here at once. One done by another serve process just before an outage
is honoured at most `TTL_S` after this process last verified the session; an entry never outlives the
session's own expiry. Only a hash of the token is kept, as in the store.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from grader.service.accounts import Session, digest

TTL_S = 15 * 60.0  # an entry is trusted this long after the store last vouched for its session
MAX_ENTRIES = 4096  # a class or several: the least recently verified go first


@dataclass
class RecentSessions:
    ttl_s: float = TTL_S
    max_entries: int = MAX_ENTRIES
    clock: Callable[[], float] = time.time
    entries: OrderedDict[str, tuple[Session, float]] = field(default_factory=OrderedDict)  # hash: (session, until)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def remember(self, token: str | None, session: Session | None) -> None:
        """What the store just said of `token`: its session, or (None) that it has none, which forgets it."""
        if not token:
            return
        key = digest(token)
        with self.lock:
            if session is None:
                self.entries.pop(key, None)
                return
            self.entries[key] = (session, min(self.clock() + self.ttl_s, session.expires_at))
            self.entries.move_to_end(key)
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)

    def recall(self, token: str | None) -> Session | None:
        """The session of `token` if the store vouched for it recently enough; None otherwise. For the
        store's absence alone: whenever the store answers, it is asked."""
        if not token:
            return None
        key = digest(token)
        with self.lock:
            found = self.entries.get(key)
            if found is None:
                return None
            session, until = found
            if self.clock() >= until:
                del self.entries[key]
                return None
            return session

    def forget(self, token: str | None) -> None:
        self.remember(token, None)

    def forget_student(self, student: str) -> None:
        """Forget every session of a student (their links were revoked: they are signed out everywhere)."""
        with self.lock:
            for key in [k for k, (s, _) in self.entries.items() if s.student == student]:
                del self.entries[key]
