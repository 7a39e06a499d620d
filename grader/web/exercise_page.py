"""What the web service shows of an exercise beyond what grading needs: the statement, the visible
tests' source, the "Before you code" prediction and the [web] settings of `exercise.toml`.

Only the statement and the suites in the exercise's own folder are ever read here for a student; hidden tests and the
reference stay with the grader (the reference is shown to a premium student when the setting allows).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import date, datetime, timezone

from markdown_it import MarkdownIt

from grader.exercise import Exercise, ExerciseError

SOLUTION_RULES = ("never", "after_first_graded", "after_full_marks")


@dataclass(frozen=True)
class Prediction:
    question: str
    choices: tuple[str, ...]
    answer: int  # index into choices
    why: str


@dataclass(frozen=True)
class WebSettings:
    solution: str  # one of SOLUTION_RULES, or an ISO date
    submission_interval_s: float | None  # None: the server's setting


def _config(exercise: Exercise) -> dict:
    try:
        return tomllib.loads((exercise.folder / "exercise.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ExerciseError(f"{exercise.folder / 'exercise.toml'}: {exc}") from None


def prediction(exercise: Exercise) -> Prediction | None:
    table = _config(exercise).get("prediction")
    if not table:
        return None
    choices = tuple(str(c) for c in table.get("choices", []))
    answer = table.get("answer")
    if not table.get("question") or len(choices) < 2 or not isinstance(answer, int) or not 1 <= answer <= len(choices):
        raise ExerciseError(f"{exercise.slug}: [prediction] needs a question, two or more choices and "
                            "answer = the number of the right choice (from 1)")
    return Prediction(str(table["question"]), choices, answer - 1, str(table.get("why", "")))


def settings(exercise: Exercise) -> WebSettings:
    table = _config(exercise).get("web", {})
    rule = str(table.get("solution", "never"))
    if rule not in SOLUTION_RULES:
        try:
            date.fromisoformat(rule)
        except ValueError:
            raise ExerciseError(f"{exercise.slug}: [web] solution must be one of {', '.join(SOLUTION_RULES)} "
                                "or a date (YYYY-MM-DD)") from None
    interval = table.get("submission_interval_s")
    return WebSettings(rule, float(interval) if interval is not None else None)


def solution_open(rule: str, graded_once: bool, full_marks: bool, today: date | None = None) -> bool:
    """Whether a premium student may read the reference now."""
    if rule == "never":
        return False
    if rule == "after_first_graded":
        return graded_once
    if rule == "after_full_marks":
        return full_marks
    return (today or datetime.now(timezone.utc).date()) >= date.fromisoformat(rule)


def solution_rule_text(rule: str) -> str:
    return {"never": "is not shown for this exercise",
            "after_first_graded": "opens after your first graded submission",
            "after_full_marks": "opens once you get full marks"}.get(rule, f"opens on {rule}")


def statement_html(exercise: Exercise) -> str:
    """The README rendered as Markdown with raw HTML off (escaped), so it carries no markup of its own."""
    text = (exercise.folder / "README.md").read_text(encoding="utf-8")
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def visible_tests(exercise: Exercise) -> list[tuple[str, str]]:
    """(file name, source) of the suites published with the statement (those inside the exercise's own
    folder, which students read anyway): free for every student to read."""
    public = [s for s in exercise.suites.values() if s.path.resolve().is_relative_to(exercise.folder.resolve())]
    return [(p.name, p.read_text(encoding="utf-8")) for suite in public for p in sorted(suite.path.glob("test_*.py"))]
