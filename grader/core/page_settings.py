"""What exercise.toml says about an exercise's web page: the "Before you code" question (`[prediction]`)
and when the reference opens and how often a student may submit (`[web]`).

Read with the rest of exercise.toml when the exercise loads, so a mistake here is found by every command
(`grade`, `audit`, `serve`), not by a student opening the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

SOLUTION_RULES = ("never", "after_first_graded", "after_full_marks")
# When students see the hidden suites' results and the score: at once, once the due date has passed, or
# once an instructor releases them (the dashboard's Release).
RELEASES = ("at_once", "after_due", "on_release")
# The parts of the exercise's page a [prediction] may keep back until the student has answered.
HIDEABLE = ("statement", "visible_tests")


class SettingError(ValueError):
    """A value of [prediction] or [web] the web page cannot use (the sentence says which and why)."""


@dataclass(frozen=True)
class Prediction:
    question: str
    choices: tuple[str, ...]
    answer: int  # index into choices
    why: str
    hides: tuple[str, ...] = ()  # parts of the page (HIDEABLE) shown only once the student has answered


@dataclass(frozen=True)
class WebSettings:
    solution: str = "never"  # one of SOLUTION_RULES, or an ISO date
    submission_interval_s: float | None = None  # None: the server's setting
    due: datetime | None = None      # submissions after it are late (a student's extension moves it)
    closes: datetime | None = None   # after it the exercise takes no submission (but under an extension)
    late_penalty_per_day: float = 0.0  # percent of the exercise's points taken per day (or part of one) late
    late_cap: float | None = None      # percent of the points a late submission scores at most
    release: str = "at_once"           # one of RELEASES


def prediction(table: dict[str, Any]) -> Prediction | None:
    """The [prediction] table, checked; None when the exercise asks no question."""
    if not table:
        return None
    question, choices, answer, why = (table.get(k) for k in ("question", "choices", "answer", "why"))
    if not isinstance(question, str) or not question.strip():
        raise SettingError(f"[prediction] question must be the question's text, not {question!r}")
    if (not isinstance(choices, list) or len(choices) < 2
            or not all(isinstance(c, str) and c.strip() for c in choices)):
        raise SettingError(f"[prediction] choices must list two or more answers as text, not {choices!r}")
    if type(answer) is not int or not 1 <= answer <= len(choices):
        raise SettingError(f"[prediction] answer must be the number of the right choice, 1 to {len(choices)}, "
                           f"not {answer!r}")
    if why is not None and not isinstance(why, str):
        raise SettingError(f"[prediction] why must be text (shown once answered), not {why!r}")
    hides = table.get("hides", [])
    if not isinstance(hides, list) or not all(isinstance(h, str) and h in HIDEABLE for h in hides):
        raise SettingError(f"[prediction] hides must list parts of the page to keep back until the answer, "
                           f"of {', '.join(HIDEABLE)}; not {hides!r}")
    return Prediction(question, tuple(choices), answer - 1, why or "", tuple(hides))


def web(table: dict[str, Any]) -> WebSettings:
    """The [web] table, checked."""
    rule = table.get("solution", "never")
    if type(rule) is date:  # solution = 2026-12-24, a TOML date
        rule = rule.isoformat()
    if not isinstance(rule, str) or (rule not in SOLUTION_RULES and not _is_date(rule)):
        raise SettingError(f"[web] solution must be one of {', '.join(SOLUTION_RULES)} or a date (YYYY-MM-DD), "
                           f"not {rule!r}")
    interval = table.get("submission_interval_s")
    if interval is not None and (type(interval) not in (int, float) or not math.isfinite(interval) or interval < 0):
        raise SettingError(f"[web] submission_interval_s must be a number of seconds, 0 or more, not {interval!r}")
    due, closes = _moment(table, "due"), _moment(table, "closes")
    if closes is not None and due is not None and closes < due:
        raise SettingError(f"[web] closes ({closes.isoformat()}) must not come before due ({due.isoformat()})")
    penalty = table.get("late_penalty_per_day", 0)
    if not is_percent(penalty):
        raise SettingError(f"[web] late_penalty_per_day must be a percent of the exercise's points, 0 to 100, "
                           f"not {penalty!r}")
    cap = table.get("late_cap")
    if cap is not None and not is_percent(cap):
        raise SettingError(f"[web] late_cap must be the percent of the points a late submission scores at most, "
                           f"0 to 100, not {cap!r}")
    release = table.get("release", "at_once")
    if release not in RELEASES:
        raise SettingError(f"[web] release must be one of {', '.join(RELEASES)} (when students see the hidden "
                           f"suites' results and their score), not {release!r}")
    return WebSettings(rule, None if interval is None else float(interval), due, closes, float(penalty),
                       None if cap is None else float(cap), release)


def is_percent(value: object) -> bool:
    return isinstance(value, (int, float)) and type(value) is not bool and math.isfinite(value) and 0 <= value <= 100


def _moment(table: dict[str, Any], key: str) -> datetime | None:
    """A moment with its time zone: a TOML date-time (2026-12-20T23:59:00+01:00) or the same as text. A
    time without a zone is refused: the server's zone, a student's and the author's may all differ."""
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            value = None
    if type(value) is not datetime:
        raise SettingError(f"[web] {key} must be a date and time with its zone, such as 2026-12-20T23:59:00+01:00 "
                           f"or 2026-12-20T22:59:00Z, not {table.get(key)!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise SettingError(f"[web] {key} {value.isoformat()} has no time zone: write it with one, such as "
                           f"{value.isoformat()}+01:00 or {value.isoformat()}Z")
    return value


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10  # YYYY-MM-DD, not the week or ordinal forms fromisoformat also takes
