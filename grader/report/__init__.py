"""Feedback reports of a scorecard: one self-contained HTML page and Markdown (LMS comments, pull
requests), and the plain text the exports use.

Everything here is a function of the `Scorecard` alone. `view` computes view data (plain dicts of
strings and numbers: what to show, clipped and cleaned, by way of `text`; a trace's table and SVG
geometry come from `trace`); the Jinja templates (shipped in the package, from the project's
`templates/` folder) only lay it out (`render`). Both environments escape by default, submission text
is only ever a template *value* (never a template), and the Markdown filters (`markdown`) keep
submission text inside code spans and fences it cannot break out of. `plain` is the exports' text.
"""

from grader.report.formatting import (
                                CELL_LIMIT,
                                MESSAGE_LIMIT,
                                OUTPUT_LIMIT,
                                REASON_LIMIT,
                                TEXT_LIMIT,
                                TRACEBACK_LINES,
                                clip,
                                clip_tail,
                                one_line,
                                percent,
                                printable,
                                short_duration,
                                slug,
                                when,
)
from grader.report.markdown import md_cell, md_code, md_fence, md_text, squeeze_blank_lines
from grader.report.plain import artifact_text, result_text, run_text, trace_text
from grader.report.render import render_html, render_markdown, templates_folder
from grader.report.trace import label_colours, step_text, timeline, trace_data, trace_rows
from grader.report.view import (
                                RUN_HELP,
                                STATUS_EMOJI,
                                STATUS_HELP,
                                STATUS_LABELS,
                                artifact_view,
                                locked_suites,
                                report_view,
                                result_view,
)

__all__ = [
    "CELL_LIMIT", "MESSAGE_LIMIT", "OUTPUT_LIMIT", "REASON_LIMIT", "RUN_HELP", "STATUS_EMOJI", "STATUS_HELP",
    "STATUS_LABELS", "TEXT_LIMIT", "TRACEBACK_LINES", "artifact_text", "artifact_view", "clip", "clip_tail",
    "label_colours", "locked_suites", "md_cell", "md_code", "md_fence", "md_text", "one_line", "percent",
    "printable", "render_html", "render_markdown", "report_view", "result_text", "result_view", "run_text",
    "short_duration", "slug", "squeeze_blank_lines", "step_text", "templates_folder", "timeline", "trace_data",
    "trace_rows", "trace_text", "when",
]
