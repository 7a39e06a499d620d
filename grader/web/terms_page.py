"""The instructor's page of an exercise's terms: its due and closing dates, its late policy and when its
results are released, as a form that changes them in the store (with who changed them and when), beside
every change made so far. A date change never asks for a regrade: it decides nothing the tests find."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from starlette.datastructures import FormData

from grader.core.exercise import Exercise
from grader.core.page_settings import RELEASES
from grader.course.store import TermChange
from grader.course.terms import Terms, TermsError, checked_changes
from grader.web.exercise_page import moment_text

RELEASE_WORDS = {"at_once": "at once, as each submission is graded",
                 "after_due": "after the due date",
                 "on_release": "when an instructor releases them"}
KEY_WORDS = {"opens": "visible from", "due": "due date", "closes": "closing date", "late_penalty_per_day": "penalty per day late (%)",
             "late_cap": "cap on late work (%)", "release": "results shown", "released_at": "results released"}
# The zones the form offers: every half hour from UTC-12:00 to UTC+14:00 (and the dates' own, if another).
OFFSETS = [timedelta(minutes=m) for m in range(-12 * 60, 14 * 60 + 1, 30)]


def zone_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    return "UTC" if not minutes else f"UTC{'+' if minutes >= 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def course_zone(terms: Mapping[str, Terms], slug: str) -> timezone:
    """The zone the course shows an exercise's dates in: its own dates' (as set in exercise.toml or the
    dashboard), else those of the course's other exercises, else UTC. Every date typed for the exercise
    (its terms, a student's extension) is read in it."""
    order = ([slug] if slug in terms else []) + [other for other in sorted(terms) if other != slug]
    for found in (terms[name] for name in order):
        moment = found.due or found.closes or found.opens
        offset = moment.utcoffset() if moment is not None else None
        if offset is not None:
            return timezone(offset)
    return timezone.utc


def form_view(exercise: Exercise, terms: Terms, zone: timezone = timezone.utc) -> dict[str, Any]:
    """The form's fields as they start: the terms in force, in the course's zone (`course_zone`)."""
    zone_offset = zone.utcoffset(None)
    offsets = sorted({*OFFSETS, zone_offset})
    return {"due": _local(terms.due, zone), "closes": _local(terms.closes, zone), "opens": _local(terms.opens, zone),
            "zones": [(int(o.total_seconds() // 60), zone_text(o)) for o in offsets],
            "zone": int(zone_offset.total_seconds() // 60), "per_day": f"{terms.late.per_day:g}",
            "cap": "" if terms.late.cap is None else f"{terms.late.cap:g}", "release": terms.release,
            "releases": [(r, RELEASE_WORDS[r]) for r in RELEASES]}


def _local(moment: datetime | None, zone: timezone) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M") if moment else ""


def read_moment(typed: str, zone: timezone) -> datetime:
    """A date and time typed in a form (as a datetime-local field sends it), in the course's zone; ValueError
    when it is not one."""
    return datetime.strptime(typed.strip(), "%Y-%m-%dT%H:%M").replace(tzinfo=zone)


def changes_from(form: FormData, terms: Terms) -> dict[str, object]:
    """What the submitted form changes (only that), or TermsError saying what is wrong with it."""
    minutes = _number(form, "zone", "the time zone")
    if minutes is None or not -14 * 60 <= minutes <= 14 * 60:
        raise TermsError("choose the dates' time zone from the list")
    zone = timezone(timedelta(minutes=minutes))
    per_day = _number(form, "per_day", "the penalty per day")
    cap = _number(form, "cap", "the cap on late work")
    return checked_changes(terms, _date(form, "due", "due date", zone), _date(form, "closes", "closing date", zone),
                           per_day or 0.0, cap, str(form.get("release", "")),
                           _date(form, "opens", "date it opens", zone))


def _date(form: FormData, name: str, words: str, zone: timezone) -> datetime | None:
    typed = str(form.get(name, "")).strip()
    if not typed:
        return None
    try:
        return read_moment(typed, zone)
    except ValueError:
        raise TermsError(f"the {words} {typed[:40]!r} is not a date and time such as 2026-12-21T23:59") from None


def _number(form: FormData, name: str, words: str) -> float | None:
    typed = str(form.get(name, "")).strip()
    if not typed:
        return None
    try:
        return float(typed)
    except ValueError:
        raise TermsError(f"{words} must be a number, not {typed[:20]!r}") from None


def history_rows(history: list[tuple[str, TermChange]], named: Callable[[str], str] = str) -> list[dict[str, str]]:
    """Every change made in the dashboard, in words, the newest first; `named`: who made it, by name."""
    return [{"what": KEY_WORDS.get(key, key), "value": value_text(key, change.value), "by": named(change.by),
             "at": change.at.replace("T", " ")} for key, change in history]


def value_text(key: str, value: object) -> str:
    if value is None:
        return "back to exercise.toml's"
    if value == "":
        return "none" if key != "released_at" else "withheld again"
    if key in ("opens", "due", "closes", "released_at") and isinstance(value, str):
        return moment_text(datetime.fromisoformat(value))
    if key == "release" and isinstance(value, str):
        return RELEASE_WORDS.get(value, value)
    return f"{value:g}%" if isinstance(value, float | int) else str(value)


def summary(terms: Terms, now: datetime) -> str:
    """The dates and late policy in one line, for the dashboard's list of exercises."""
    parts = []
    if terms.opens and now < terms.opens:
        parts.append(f"hidden from students until {moment_text(terms.opens)}")
    if terms.due:
        parts.append(f"due {moment_text(terms.due)}")
    if terms.closes:
        parts.append(f"{'closed' if now > terms.closes else 'closes'} {moment_text(terms.closes)}")
    elif terms.due is None:
        parts.append("no dates")
    if terms.late.any:
        parts.append(terms.late.describe().rstrip(".").lower())
    return " · ".join(parts)  # the release has a line of its own, with its button
