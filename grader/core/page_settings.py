"""What exercise.toml says about an exercise's web page: the "Before you code" question (`[prediction]`)
and when the reference opens and how often a student may submit (`[web]`).

Read with the rest of exercise.toml when the exercise loads, so a mistake here is found by every command
(`grade`, `audit`, `serve`), not by a student opening the page.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from grader.core.toml_specs import Check, Field, Refused, Table, read, rule

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
    opens: datetime | None = None    # before it students do not see the exercise ("visible from")
    closes: datetime | None = None   # after it the exercise takes no submission (but under an extension)
    late_penalty_per_day: float = 0.0  # percent of the exercise's points taken per day (or part of one) late
    late_cap: float | None = None      # percent of the points a late submission scores at most
    release: str = "at_once"           # one of RELEASES


def prediction(table: dict[str, Any]) -> Prediction | None:
    """The [prediction] table, checked; None when the exercise asks no question."""
    found: Prediction | None = _read(table, PREDICTION)
    return found


def web(table: dict[str, Any]) -> WebSettings:
    """The [web] table, checked."""
    settings: WebSettings = _read(table, WEB)
    return settings


def _read(table: dict[str, Any], spec: Table) -> Any:
    try:
        return read(table, spec)
    except Refused as refused:
        raise SettingError(str(refused)) from None


def is_percent(value: object) -> bool:
    return isinstance(value, (int, float)) and type(value) is not bool and math.isfinite(value) and 0 <= value <= 100


def _moment(value: str | datetime) -> datetime:
    """A TOML date-time (2026-12-20T23:59:00+01:00) or the same as text (a ValueError if it is none)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value


def _has_zone(value: datetime, known: Mapping[str, Any]) -> bool:
    return value.tzinfo is not None and value.utcoffset() is not None


def _no_zone(value: datetime, known: Mapping[str, Any]) -> str:
    moment = value.isoformat()
    return (f"[web] {known['key']} {moment} has no time zone: write it with one, such as {moment}+01:00 or "
            f"{moment}Z")


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10  # YYYY-MM-DD, not the week or ordinal forms fromisoformat also takes


def _later_than_due(closes: datetime, known: Mapping[str, Any]) -> bool:
    return known["due"] is None or closes >= known["due"]


def _not_after_due(opens: datetime, known: Mapping[str, Any]) -> bool:
    return known["due"] is None or opens <= known["due"]


def _after_due(opens: datetime, known: Mapping[str, Any]) -> str:
    return f"[web] opens ({opens.isoformat()}) must not come after due ({known['due'].isoformat()})"


def _before_due(closes: datetime, known: Mapping[str, Any]) -> str:
    return f"[web] closes ({closes.isoformat()}) must not come before due ({known['due'].isoformat()})"


def _answer_says(answer: object, known: Mapping[str, Any]) -> str:
    return (f"[prediction] answer must be the number of the right choice, 1 to {len(known['choices'])}, "
            f"not {answer!r}")


PREDICTION = Table("[prediction] ", (
    Field("question", (str,), "[prediction] question must be the question's text, not {value!r}",
          checks=(rule(lambda text: bool(text.strip()), "[prediction] question must be the question's text, "
                                                            "not {value!r}"),)),
    Field("choices", (list,), "[prediction] choices must list two or more answers as text, not {value!r}",
          convert=tuple, checks=(rule(lambda choices: len(choices) >= 2 and all(
              isinstance(c, str) and c.strip() for c in choices),
              "[prediction] choices must list two or more answers as text, not {value!r}"),)),
    Field("answer", (int,), _answer_says,
          checks=(Check(lambda answer, known: 1 <= answer <= len(known["choices"]), _answer_says),)),
    Field("why", (str,), "[prediction] why must be text (shown once answered), not {value!r}", default=""),
    Field("hides", (list,), "[prediction] hides must list parts of the page to keep back until the answer, of "
          + ", ".join(HIDEABLE) + "; not {value!r}", default=[], convert=tuple,
          checks=(rule(lambda hides: all(isinstance(h, str) and h in HIDEABLE for h in hides),
                       "[prediction] hides must list parts of the page to keep back until the answer, of "
                       + ", ".join(HIDEABLE) + "; not {value!r}"),)),
), build=lambda values, known: Prediction(values["question"], values["choices"], values["answer"] - 1,
                                          values["why"], values["hides"]),
    if_empty=None)

_SOLUTION = ("[web] solution must be one of " + ", ".join(SOLUTION_RULES) + " or a date (YYYY-MM-DD), "
             "not {value!r}")
_MOMENT = ("[web] {key} must be a date and time with its zone, such as 2026-12-20T23:59:00+01:00 or "
           "2026-12-20T22:59:00Z, not {value!r}")
_PENALTY = "[web] late_penalty_per_day must be a percent of the exercise's points, 0 to 100, not {value!r}"
_CAP = "[web] late_cap must be the percent of the points a late submission scores at most, 0 to 100, not {value!r}"
_RELEASE = ("[web] release must be one of " + ", ".join(RELEASES) + " (when students see the hidden suites' "
            "results and their score), not {value!r}")
_INTERVAL = "[web] submission_interval_s must be a number of seconds, 0 or more, not {value!r}"

WEB = Table("[web] ", (
    # solution = 2026-12-24 is a TOML date: kept as its text, as a date in quotes is.
    Field("solution", (str, date), _SOLUTION, default="never",
          convert=lambda said: said.isoformat() if type(said) is date else said,
          checks=(rule(lambda said: said in SOLUTION_RULES or _is_date(said), _SOLUTION),)),
    Field("submission_interval_s", (int, float), _INTERVAL, default=None, convert=float,
          checks=(rule(lambda interval: math.isfinite(interval) and interval >= 0, _INTERVAL),)),
    # A time without a zone is refused: the server's zone, a student's and the author's may all differ.
    Field("due", (str, datetime), _MOMENT, default=None, convert=_moment, checks=(Check(_has_zone, _no_zone),)),
    Field("opens", (str, datetime), _MOMENT, default=None, convert=_moment,
          checks=(Check(_has_zone, _no_zone), Check(_not_after_due, _after_due))),
    Field("closes", (str, datetime), _MOMENT, default=None, convert=_moment,
          checks=(Check(_has_zone, _no_zone), Check(_later_than_due, _before_due))),
    Field("late_penalty_per_day", (int, float), _PENALTY, default=0, convert=float,
          checks=(rule(is_percent, _PENALTY),)),
    Field("late_cap", (int, float), _CAP, default=None, convert=float, checks=(rule(is_percent, _CAP),)),
    Field("release", (str,), _RELEASE, default="at_once", checks=(rule(lambda release: release in RELEASES, _RELEASE),)),
), build=lambda values, known: WebSettings(**values))
