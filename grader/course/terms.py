"""An exercise's terms: what a course decides of it beyond its grading (due and closing dates, the late
policy, when students see the hidden suites' results), from exercise.toml's `[web]` table, as the
instructor has changed them in the dashboard since.

The terms decide nothing of what the tests find: a change is never a reason to grade again (the
exercise's fingerprint leaves `[web]` out), and every page, gradebook and site reads them as they are now.
Each change is kept in the store with who made it and when (`Store.exercise_terms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from grader.core.exercise import Exercise
from grader.core.page_settings import RELEASES, is_percent
from grader.course.store import TermChange

DAY_S = 86400
# The keys the dashboard may set, each standing for the [web] setting of that name (released_at: when an
# instructor released the results, for `release = "on_release"`).
KEYS = ("opens", "due", "closes", "late_penalty_per_day", "late_cap", "release", "released_at")


class TermsError(ValueError):
    """A change of terms that cannot hold (the sentence says which and why)."""


@dataclass(frozen=True)
class LatePolicy:
    """What lateness costs. `per_day`: the percent of the exercise's points taken off for each day, or
    part of a day, after the due date; `cap`: the percent of the points a late submission scores at most.
    With both, the larger deduction holds. Neither: late work keeps its score (and is marked late)."""
    per_day: float = 0.0
    cap: float | None = None

    @property
    def any(self) -> bool:
        return bool(self.per_day) or self.cap is not None

    def deduction(self, score: float, max_score: float, late_by_s: float) -> float:
        """The points a submission scoring `score` of `max_score` loses for coming `late_by_s` seconds
        after its due date (never more than it scored), rounded to hundredths."""
        if late_by_s <= 0 or score <= 0:
            return 0.0
        by_days = max_score * self.per_day / 100 * math.ceil(late_by_s / DAY_S)
        by_cap = max(0.0, score - max_score * self.cap / 100) if self.cap is not None else 0.0
        return round(min(score, max(by_days, by_cap)), 2)

    def describe(self) -> str:
        """The policy in a sentence, for the pages a student reads before handing in late."""
        parts = []
        if self.per_day:
            parts.append(f"{self.per_day:g}% of the points is taken off for each day (or part of a day) late")
        if self.cap is not None:
            parts.append(f"a late submission scores at most {self.cap:g}% of the points")
        if not parts:
            return "Late work is marked late and keeps its score."
        return ("; ".join(parts) + (", whichever takes off more" if len(parts) == 2 else "")).capitalize() + "."


@dataclass(frozen=True)
class Terms:
    due: datetime | None = None
    opens: datetime | None = None  # "visible from": before it students do not see the exercise
    closes: datetime | None = None
    late: LatePolicy = LatePolicy()
    release: str = "at_once"
    released_at: datetime | None = None
    changed: dict[str, TermChange] = field(default_factory=dict)  # the keys set in the dashboard

    def is_visible(self, now: datetime) -> bool:
        """Whether students see the exercise now (its page, its submit route, the lists, a launch)."""
        return self.opens is None or now >= self.opens

    def released(self, now: datetime) -> bool:
        """Whether students see the hidden suites' results and their score now."""
        if self.release == "at_once":
            return True
        if self.release == "after_due":
            return self.due is None or now > self.due
        return self.released_at is not None


def terms_of(exercise: Exercise, changes: dict[str, TermChange] | None = None) -> Terms:
    """The exercise's terms: exercise.toml's, overridden by the changes made in the dashboard (a key set
    back to None takes exercise.toml's value again; a date set to "" is none)."""
    web = exercise.web
    given = {key: change.value for key, change in (changes or {}).items() if change.value is not None}
    cap = given.get("late_cap", web.late_cap)
    return Terms(due=_moment(given["due"]) if "due" in given else web.due,
                 opens=_moment(given["opens"]) if "opens" in given else web.opens,
                 closes=_moment(given["closes"]) if "closes" in given else web.closes,
                 late=LatePolicy(float(given.get("late_penalty_per_day", web.late_penalty_per_day)),  # type: ignore[arg-type]
                                 None if cap in (None, "") else float(cap)),  # type: ignore[arg-type]
                 release=str(given.get("release", web.release)),
                 released_at=_moment(given.get("released_at", "")),
                 changed={key: change for key, change in (changes or {}).items() if key in KEYS})


def _moment(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def checked_changes(terms: Terms, due: datetime | None, closes: datetime | None, per_day: float,
                    cap: float | None, release: str, opens: datetime | None = None) -> dict[str, object]:
    """The changes of the dashboard's form as the store keeps them, or TermsError saying what cannot hold."""
    if opens is not None and due is not None and opens > due:
        raise TermsError(f"the exercise cannot open ({opens.isoformat(' ', 'minutes')}) after it is due "
                         f"({due.isoformat(' ', 'minutes')})")
    if closes is not None and due is not None and closes < due:
        raise TermsError(f"the exercise cannot close ({closes.isoformat(' ', 'minutes')}) before it is due "
                         f"({due.isoformat(' ', 'minutes')})")
    if not is_percent(per_day):
        raise TermsError(f"the penalty per day is a percent of the points, 0 to 100, not {per_day!r}")
    if cap is not None and not is_percent(cap):
        raise TermsError(f"the cap is the percent of the points a late submission scores at most, 0 to 100, "
                         f"not {cap!r}")
    if release not in RELEASES:
        raise TermsError(f"results are released {' or '.join(RELEASES)}, not {release!r}")
    now_in_force: dict[str, object] = {"opens": terms.opens, "due": terms.due, "closes": terms.closes, "late_penalty_per_day": terms.late.per_day,
                                       "late_cap": terms.late.cap, "release": terms.release}
    asked: dict[str, object] = {"opens": opens, "due": due, "closes": closes, "late_penalty_per_day": float(per_day),
                                "late_cap": None if cap is None else float(cap), "release": release}
    # Only what the form changes is recorded (with who changed it): saving the form as it was changes nothing.
    stored = {"opens": opens.isoformat() if opens else "", "due": due.isoformat() if due else "", "closes": closes.isoformat() if closes else "",
              "late_penalty_per_day": float(per_day), "late_cap": "" if cap is None else float(cap),
              "release": release}
    return {key: stored[key] for key in stored if asked[key] != now_in_force[key]}
