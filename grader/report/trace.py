"""A trace artifact's geometry: steps of (label, amount) on two sides, cleaned, as table rows
around the first difference and as the SVG timeline's bars, ticks and marks. It knows nothing of
what the steps and labels mean: that is the exercise's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from grader.report.formatting import one_line

LEGEND_LIMIT = 24       # labels named in a timeline's legend
CHART_STEPS = 200       # steps a timeline draws at most
CHART_AFTER = 6         # steps a timeline draws after the first difference

# Label colours of the trace timeline: distinct, readable on white and on dark backgrounds.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2",
           "#ff9da7", "#9c755f", "#e15759", "#86bcb6", "#8cd17d", "#d4a6c8")


def _segments(step: Any) -> list[tuple[str, int]]:
    out = []
    for seg in step if isinstance(step, list) else []:
        if isinstance(seg, (list, tuple)) and len(seg) == 2:
            try:
                out.append((one_line(seg[0], 40), int(seg[1])))
            except (TypeError, ValueError):
                continue
    return out


def _steps(value: Any) -> list[list[tuple[str, int]]]:
    return [_segments(step) for step in value] if isinstance(value, list) else []


def step_text(step: list[tuple[str, int]] | None) -> str:
    """One step of a trace as text: 'r1: 49, r3: 23'; '(nothing)' for an empty step; '(no step)' for
    a step one side never reached."""
    if step is None:
        return "(no step)"
    if not step:
        return "(nothing)"
    return ", ".join(f"{label}: {amount}" for label, amount in step)


def label_colours(expected: list[list[tuple[str, int]]], got: list[list[tuple[str, int]]]) -> dict[str, str]:
    """One colour per label, in order of first appearance, the same on both sides."""
    colours: dict[str, str] = {}
    for step in (*expected, *got):
        for label, _ in step:
            if label not in colours:
                colours[label] = PALETTE[len(colours) % len(PALETTE)]
    return colours


def trace_data(artifact: dict[str, Any]) -> dict[str, Any]:
    """A trace artifact, cleaned: steps on both sides, their offset, the first difference (index into
    the steps shown, or None), and the colour of each label."""
    expected, got = _steps(artifact.get("expected")), _steps(artifact.get("got"))
    first = artifact.get("first_step")
    first_step: int = first if isinstance(first, int) else 0
    diff = artifact.get("first_difference")
    count = max(len(expected), len(got), 1)
    local = diff - first_step if isinstance(diff, int) and 0 <= diff - first_step < count else None
    return {
        "title": one_line(artifact.get("title", "trace"), 120),
        "expected_label": one_line(artifact.get("expected_label", "expected"), 40),
        "got_label": one_line(artifact.get("got_label", "got"), 40),
        "unit": one_line(artifact.get("unit", ""), 30),
        "expected": expected,
        "got": got,
        "first_step": max(0, first_step),
        "first_difference": local,
        "colours": label_colours(expected, got),
    }


def trace_rows(artifact: dict[str, Any], before: int | None = None, after: int = 3) -> dict[str, Any]:
    """The step-by-step table of a trace: one row per step (1-based step numbers as the messages
    count them), each side's segments, whether the step differs and which one is the first difference.

    With `before` set, only a window is kept: up to `before` steps before the first difference and
    `after` steps after it (without a difference, the last steps: the test failed at the trace's end
    on something else it compared); `hidden_before`/`hidden_after` count the steps left out.
    """
    data = trace_data(artifact)
    expected, got, first = data["expected"], data["got"], data["first_difference"]
    count = max(len(expected), len(got))
    start, stop = 0, count
    if before is not None and first is not None:
        start, stop = max(0, first - before), min(count, first + after + 1)
    elif before is not None:  # the two sides agree: a trace runs up to the failing step, so its end is kept
        start = max(0, count - (before + after + 1))
    rows = []
    for i in range(start, stop):
        want = expected[i] if i < len(expected) else None
        have = got[i] if i < len(got) else None
        rows.append({
            "step": data["first_step"] + i + 1,
            "expected": want,
            "got": have,
            "expected_text": step_text(want),
            "got_text": step_text(have),
            "expected_marks": _marks(want, have),
            "got_marks": _marks(have, want),
            "differs": want != have,
            "first": i == first,
        })
    return {**data, "rows": rows, "count": count, "hidden_before": start, "hidden_after": count - stop,
            "first_difference_step": None if first is None else data["first_step"] + first + 1}


def _marks(side: list[tuple[str, int]] | None, other: list[tuple[str, int]] | None) -> list[bool]:
    """Per segment of `side`: True when the other side has no equal segment at that position."""
    if side is None:
        return []
    other = other or []
    return [i >= len(other) or other[i] != seg for i, seg in enumerate(side)]


def _nice_ceiling(value: float) -> int:
    if value <= 1:
        return 1
    magnitude: float = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= value:
            return math.ceil(factor * magnitude)
    return int(10 * magnitude)


@dataclass(frozen=True)
class _Frame:
    """Where a timeline's steps lie: steps lo..hi-1 are drawn, each a column `step_w` wide holding two
    bars `bar_w` wide; amounts 0..ymax go from `base` up `plot_h` pixels."""
    lo: int
    hi: int
    count: int  # the steps of the longer side (at least 1)
    step_w: float
    gap: float
    bar_w: float
    width: float
    ymax: int
    first: int | None  # the first difference, if any
    caption: str
    left: float = 46.0
    right: float = 14.0
    top: float = 30.0
    bottom: float = 38.0
    plot_h: float = 150.0

    @property
    def shown(self) -> int:
        return self.hi - self.lo

    @property
    def base(self) -> float:
        return self.top + self.plot_h

    @property
    def height(self) -> float:
        return self.top + self.plot_h + self.bottom

    def y(self, value: float) -> float:
        return self.base - self.plot_h * value / self.ymax

    def column(self, i: int) -> float:
        """The left edge of step i's column."""
        return self.left + (i - self.lo) * self.step_w


def timeline(artifact: dict[str, Any], max_steps: int = CHART_STEPS) -> dict[str, Any]:
    """Geometry of the inline SVG timeline of a trace: per step, the amounts per label as two stacked
    bars side by side (expected on the left, drawn lighter; got on the right, solid), a band and a
    caption on the first difference, step numbers on the x axis, amounts on the y axis.

    The drawing covers the steps up to a few after the first difference (at most `max_steps` of them,
    ending there), so the difference sits at its right end. Bars shrink with the number of steps, down
    to 3 px, and the page shows the drawing in a box that scrolls sideways and starts at its right end.
    """
    data = trace_data(artifact)
    frame = _frame(data, max_steps)
    lo, hi = frame.lo, frame.hi
    bars, misses = _bars(frame, data)
    colours = {label: colour for label, colour in data["colours"].items()
               if any(label == seg[0] for step in (*data["expected"][lo:hi], *data["got"][lo:hi]) for seg in step)}
    legend = [{"label": label, "colour": colour} for label, colour in list(colours.items())[:LEGEND_LIMIT]]
    first_no, last_no = data["first_step"] + lo + 1, data["first_step"] + hi
    caption = frame.caption
    return {
        "width": round(frame.width), "height": round(frame.height), "left": frame.left,
        "plot_width": round(frame.width - frame.left), "top": frame.top, "base": frame.base,
        "plot_right": round(frame.column(hi), 2), "ticks": _ticks(frame), "bars": bars, "misses": misses,
        "labels": _step_labels(frame, data["first_step"]), "marker": _marker(frame), "legend": legend,
        "legend_more": max(0, len(colours) - LEGEND_LIMIT), "steps": frame.shown,
        "first_no": first_no, "last_no": last_no,
        "partial": lo > 0 or hi < frame.count or data["first_step"] > 0,
        "expected_label": data["expected_label"], "got_label": data["got_label"], "unit": data["unit"],
        "summary": (f"{data['unit'] or 'amounts'} per step, steps {first_no} to {last_no}; "
                    f"{data['expected_label']} on the left of each pair, "
                    f"{data['got_label']} on the right" + (f"; {caption}" if caption else "; the two agree")),
    }


def _frame(data: dict[str, Any], max_steps: int) -> _Frame:
    """The steps drawn (up to a few after the first difference, at most `max_steps`), and their sizes."""
    expected, got, first = data["expected"], data["got"], data["first_difference"]
    count = max(len(expected), len(got), 1)
    hi = count if first is None else min(count, first + CHART_AFTER + 1)
    lo = max(0, hi - max_steps)
    shown = hi - lo
    step_w = max(9.0, min(60.0, 640.0 / shown))
    gap = max(1.5, step_w * 0.22)
    caption = f"first difference: step {data['first_step'] + first + 1}" if first is not None else ""
    left, right = _Frame.left, _Frame.right
    width = max(left + shown * step_w + right, left + len(caption) * 6.4 + right, 220.0)
    totals = [sum(a for _, a in step) for step in (*expected[lo:hi], *got[lo:hi])]
    return _Frame(lo=lo, hi=hi, count=count, step_w=step_w, gap=gap, bar_w=(step_w - gap - 1) / 2, width=width,
                  ymax=_nice_ceiling(max([*totals, 1])), first=first, caption=caption)


def _ticks(frame: _Frame) -> list[dict[str, Any]]:
    # Amounts are whole numbers: so are the ticks (five of 0..5, not 1.25, 2.5, 3.75).
    ymax = frame.ymax
    intervals = ymax if ymax <= 4 else next(n for n in (4, 5, 2, 1) if ymax % n == 0)
    return [{"y": round(frame.y(ymax * k / intervals), 1), "label": _tick_label(ymax * k / intervals)}
            for k in range(intervals + 1)]


def _bars(frame: _Frame, data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each step's stacked bars, expected on the left and got on the right, and a mark where a side
    has no such step."""
    unit = f" {data['unit']}" if data["unit"] else ""
    bars, misses = [], []
    for i in range(frame.lo, frame.hi):
        x0 = frame.column(i) + frame.gap / 2
        step_no = data["first_step"] + i + 1
        for side, steps, x, who in ((0, data["expected"], x0, data["expected_label"]),
                                    (1, data["got"], x0 + frame.bar_w + 1, data["got_label"])):
            if i >= len(steps):
                misses.append({"x": round(x + frame.bar_w / 2, 1), "y": round(frame.base - 4, 1), "side": side,
                               "title": f"step {step_no}, {who}: no step"})
                continue
            level = 0.0
            for label, amount in steps[i]:
                if amount <= 0:
                    continue
                h = frame.plot_h * amount / frame.ymax
                bars.append({"x": round(x, 2), "y": round(frame.y(level) - h, 2), "w": round(frame.bar_w, 2),
                             "h": round(h, 2), "colour": data["colours"][label], "side": side,
                             "title": f"step {step_no}, {who}: {label} {amount}{unit}"})
                level += amount
    return bars, misses


def _step_labels(frame: _Frame, first_step: int) -> list[dict[str, Any]]:
    """Step numbers on the x axis, as many as fit, and always the first difference's (others too close
    to it are left out)."""
    first = frame.first
    label_every = next(k for k in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000, 10**9) if k * frame.step_w >= 26)
    labels = []
    first_x = None if first is None else frame.column(first) + frame.step_w / 2
    for i in range(frame.lo, frame.hi):
        step_no = first_step + i + 1
        x = frame.column(i) + frame.step_w / 2
        regular = step_no % label_every == 0 or i == frame.lo
        if i == first or (regular and (first_x is None or abs(x - first_x) >= 24)):
            labels.append({"x": round(x, 1), "label": str(step_no), "first": i == first})
    return labels


def _marker(frame: _Frame) -> dict[str, Any] | None:
    """The band on the first difference and its caption, kept inside the drawing."""
    if frame.first is None:
        return None
    band_x, step_w, caption = frame.column(frame.first), frame.step_w, frame.caption
    anchor, text_x = "middle", band_x + step_w / 2
    if text_x - len(caption) * 3.2 < frame.left + 2:
        anchor, text_x = "start", max(frame.left + 2, band_x)
    elif text_x + len(caption) * 3.2 > frame.width - 4:
        anchor, text_x = "end", min(frame.width - 4, band_x + step_w)
    return {"x": round(band_x, 2), "w": round(step_w, 2), "y": frame.top - 6, "h": frame.plot_h + 6,
            "cx": round(band_x + step_w / 2, 2), "text_x": round(text_x, 2), "anchor": anchor, "caption": caption}


def _tick_label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"
