"""What the web service shows of an exercise beyond what grading needs: the statement, the visible
tests' source, and what the [web] settings of `exercise.toml` (`Exercise.web`) mean for a student.

Only the statement and the suites in the exercise's own folder are ever read here for a student; hidden tests and the
reference stay with the grader (the reference is shown to a premium student when the setting allows).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

from markdown_it import MarkdownIt

from grader.core.exercise import Exercise


def solution_open(rule: str, graded_once: bool, full_marks: bool, today: date | None = None) -> bool:
    """Whether a premium student may read the reference now."""
    if rule == "never":
        return False
    if rule == "after_first_graded":
        return graded_once
    if rule == "after_full_marks":
        return full_marks
    return (today or datetime.now(timezone.utc).date()) >= date.fromisoformat(rule)


def solution_rule_text(rule: str, closed: bool = False) -> str:
    """When the reference opens, following "The reference solution" and read while it is not open to
    the student. Once the exercise takes no more of their submissions, a rule that waits for one cannot
    be met any more: said so, rather than promised."""
    if closed and rule in ("after_first_graded", "after_full_marks"):
        waits_for = ("opens after a first graded submission, and you have none" if rule == "after_first_graded"
                     else "opens with full marks, and no submission of yours has them")
        return (f"{waits_for}: it stays closed, as this exercise takes no more submissions (unless your "
                "instructor gives you an extension)")
    return {"never": "is not shown for this exercise",
            "after_first_graded": "opens after your first graded submission",
            "after_full_marks": "opens once you get full marks"}.get(rule, f"opens on {rule}")


def statement_html(exercise: Exercise) -> str:
    """The README rendered as Markdown with raw HTML off (escaped), so it carries no markup of its own."""
    text = (exercise.folder / "README.md").read_text(encoding="utf-8")
    html: str = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)  # the HTML renderer: text
    # A code block wider than a phone scrolls in its box: focusable, so that the keyboard scrolls it too (WCAG
    # 2.1.1). Raw HTML is escaped above, so every "<pre>" here is the renderer's own.
    return html.replace("<pre>", '<pre tabindex="0">')


def visible_tests(exercise: Exercise) -> list[tuple[str, str]]:
    """(file name, source) of the suites published with the statement (those inside the exercise's own
    folder, which students read anyway): free for every student to read."""
    public = [s for s in exercise.suites.values() if s.path.resolve().is_relative_to(exercise.folder.resolve())]
    return [(p.name, p.read_text(encoding="utf-8")) for suite in public for p in sorted(suite.path.glob("test_*.py"))]


def moment_text(moment: datetime) -> str:
    """A moment as the exercise's author wrote its zone: 2026-12-20 23:59 UTC+01:00."""
    offset = moment.utcoffset()
    if offset is None or not offset:
        zone = "UTC"
    else:
        minutes = int(offset.total_seconds() // 60)
        zone = f"UTC{'+' if minutes >= 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return f"{moment.strftime('%Y-%m-%d %H:%M')} {zone}"


def how_long(seconds: float) -> str:
    """A duration in the two largest units a person counts in: "2 days 3 hours", "5 minutes"."""
    seconds = abs(int(seconds))
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts[:2]) or "less than a minute"


def deadline_view(due: datetime | None, closes: datetime | None, extended: bool, now: datetime,
                  late_policy: str = "") -> dict[str, Any] | None:
    """What the exercise page says of its dates to one student; None when the exercise has none.
    `late_policy`: what lateness costs, in a sentence ("" for none), said before a student hands in late."""
    if due is None and closes is None:
        return None
    view: dict[str, Any] = {"extended": extended, "open": closes is None or now <= closes, "late": False,
                  "due": "", "when": "", "closes": "", "policy": late_policy if due is not None else ""}
    if due is not None:
        left = (due - now).total_seconds()
        view.update(due=moment_text(due), late=left < 0,
                    when=f"in {how_long(left)}" if left >= 0 else f"{how_long(left)} ago")
    if closes is not None:
        view["closes"] = moment_text(closes)
    return view
