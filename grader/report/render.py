"""Rendering: the Jinja environment over the templates shipped with the package, and the HTML
page and Markdown of a scorecard."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

import grader
from grader.core.scorecard import Scorecard
from grader.report.formatting import one_line
from grader.report.markdown import md_cell, md_code, md_fence, md_text, squeeze_blank_lines
from grader.report.trace import timeline
from grader.report.view import report_view

TITLE_BAND = 20     # px above a standalone timeline's plot, for its title
LEGEND_ROW = 16.0   # px between two rows of a standalone timeline's legend
CHAR_WIDTH = 6.2    # px: about one character of the legend's 10.5 px text
IMAGE_STEPS = 30    # steps a standalone timeline draws at most (the HTML page's draws up to 200)


def templates_folder() -> Path:
    """The templates this grader was shipped with: `grader/templates/` in an installed package (the
    wheel maps the project's `templates/` there), else `templates/` beside the package in a checkout."""
    package = Path(grader.__file__).resolve().parent
    for folder in (package / "templates", package.parent / "templates"):
        if (folder / "report.html.j2").is_file():
            return folder
    raise FileNotFoundError(f"no report templates in {package / 'templates'} or {package.parent / 'templates'}")


@lru_cache(maxsize=4)
def _environment(folder: str) -> Environment:
    env = Environment(
        loader=FileSystemLoader(folder),
        autoescape=select_autoescape(enabled_extensions=("html", "md", "j2"), default=True,
                                     default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md_text=md_text, md_code=md_code, md_cell=md_cell, md_fence=md_fence,
                       thousands=lambda n: f"{n:,}")
    return env


def environment() -> Environment:
    """The Jinja environment over the shipped templates: autoescape on, the Markdown filters."""
    return _environment(str(templates_folder()))


def _render(name: str, card: Scorecard, held: dict[str, Any] | None = None, **context: Any) -> str:
    return environment().get_template(name).render(r=report_view(card, held), **context)


def render_html(card: Scorecard, back: tuple[str, str] | None = None, held: dict[str, Any] | None = None) -> str:
    """One self-contained HTML page: inline CSS and SVG, no script, nothing fetched. `back`: (address,
    words) of a link back to where the report was opened from (the service's submission page). `held`:
    the results withheld from a student until release (`report_view`)."""
    return _render("report.html.j2", card, held, back=back)


def render_markdown(card: Scorecard) -> str:
    """The same content as Markdown, for LMS comments and pull requests."""
    return squeeze_blank_lines(_render("report.md.j2", card))


def render_test_markdown(test_view: dict[str, Any]) -> str:
    """One test's details (`report_view`'s or `result_view`'s dict of it) as Markdown, as the report
    shows them: what it checks, the message, the traceback, what the code printed, the step tables."""
    module = environment().get_template("_test.md.j2").module
    return squeeze_blank_lines(str(module.test_details(test_view)))  # type: ignore[attr-defined]


def render_timeline_svg(artifact: dict[str, Any], max_steps: int = IMAGE_STEPS) -> str:
    """A trace artifact's timeline as one standalone SVG document (colours inline, legend below the
    plot, no tooltips: an image shows none), for platforms that show images rather than HTML. It draws
    at most `max_steps` steps, ending a few after the first difference, to stay small."""
    chart = timeline(artifact, max_steps=max_steps)
    title = one_line(artifact.get("title", "trace"), 120)
    legend, x, y = [], 6.0, TITLE_BAND + chart["height"] + 4.0
    entries = [(None, f"left: {chart['expected_label']}, right: {chart['got_label']}")]
    entries += [(item["colour"], item["label"]) for item in chart["legend"]]
    if chart["legend_more"]:
        entries.append((None, f"+{chart['legend_more']} more"))
    for colour, label in entries:
        width = (14 if colour else 0) + len(label) * CHAR_WIDTH + 14
        if x > 6 and x + width > chart["width"]:
            x, y = 6.0, y + LEGEND_ROW
        legend.append({"colour": colour, "label": label, "x": round(x, 1), "y": round(y, 1),
                       "text_x": round(x + (14 if colour else 0), 1)})
        x += width
    return environment().get_template("timeline.svg.j2").render(
        c=chart, title=title, legend=legend, head=TITLE_BAND, height=round(y + 8))
