"""Rendering: the Jinja environment over the templates shipped with the package, and the HTML
page and Markdown of a scorecard."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

import grader
from grader.report.markdown import md_cell, md_code, md_fence, md_text, squeeze_blank_lines
from grader.report.view import report_view
from grader.scorecard import Scorecard


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


def _render(name: str, card: Scorecard) -> str:
    return environment().get_template(name).render(r=report_view(card))


def render_html(card: Scorecard) -> str:
    """One self-contained HTML page: inline CSS and SVG, no script, nothing fetched."""
    return _render("report.html.j2", card)


def render_markdown(card: Scorecard) -> str:
    """The same content as Markdown, for LMS comments and pull requests."""
    return squeeze_blank_lines(_render("report.md.j2", card))
