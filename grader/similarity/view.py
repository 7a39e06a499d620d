"""A similarity report as data: the JSON `grader similarity --json` writes, and the views its HTML
pages (the report's folder, and the service's instructor pages) are rendered from."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import grader
from grader.report.render import environment
from grader.similarity.compare import CLUSTER_SCORE, MIN_SHARED, Document, Pair, Report
from grader.similarity.winnow import K, W

SCHEMA_VERSION = 1
COLOURS = 6  # region colours the pages cycle through


def percent(share: float) -> int:
    return round(100 * share)


def document_dict(document: Document) -> dict[str, Any]:
    return {"label": document.label, "kind": document.kind, "submission_id": document.submission_id,
            "fingerprints": document.fingerprints, "common": document.common,
            "given_kgrams": document.given_kgrams,
            "score": None if document.card is None else document.card.score,
            "max_score": None if document.card is None else document.card.max_score}


def pair_dict(pair: Pair, rank: int) -> dict[str, Any]:
    behaviour = pair.behaviour
    return {"rank": rank, "a": pair.a.label, "b": pair.b.label, "a_kind": pair.a.kind, "b_kind": pair.b.kind,
            "score": round(pair.score, 4), "a_share": round(pair.a_share, 4), "b_share": round(pair.b_share, 4),
            "shared": pair.shared,
            "regions": [{"a_lines": list(r.a_lines), "b_lines": list(r.b_lines), "fingerprints": r.fingerprints}
                        for r in pair.regions],
            "behaviour": {"kind": behaviour.kind, "strong": behaviour.strong, "summary": behaviour.summary(),
                          "both_failed": behaviour.both_failed, "same_message": behaviour.same_message}}


def report_dict(report: Report, policy: str = "") -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "exercise": report.exercise, "policy": policy,
            "generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "grader_version": grader.__version__,
            "settings": {"k": K, "window": W, "min_shared": MIN_SHARED, "cluster_score": CLUSTER_SCORE,
                         "common_limit": report.common_limit},
            "students": report.students, "ignored_common": report.ignored_common,
            "pairs_found": report.pairs_found,
            "clusters": report.clusters,
            "widely_shared": report.widely_shared,
            "pairs": [pair_dict(pair, rank) for rank, pair in enumerate(report.pairs, start=1)],
            "documents": [document_dict(d) for d in report.documents]}


def to_json(report: Report, policy: str = "") -> str:
    return json.dumps(report_dict(report, policy), indent=2, ensure_ascii=False) + "\n"


def side_lines(document: Document, spans: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """The file's lines, each with the region it belongs to (or None) and whether a region starts there."""
    owner: dict[int, int] = {}
    starts: dict[int, int] = {}
    for region, first, last in spans:
        starts.setdefault(first, region)
        for line in range(first, last + 1):
            owner.setdefault(line, region)
    return [{"number": n, "text": text, "region": owner.get(n), "starts": starts.get(n)}
            for n, text in enumerate(document.text.splitlines() or [""], start=1)]


def pair_view(report: Report, rank: int) -> dict[str, Any]:
    pair = report.pairs[rank - 1]
    numbered = list(enumerate(pair.regions, start=1))
    regions = [{"number": i, "colour": i % COLOURS, "a_lines": r.a_lines, "b_lines": r.b_lines,
                "fingerprints": r.fingerprints} for i, r in numbered]
    return {"rank": rank, "pair": pair_dict(pair, rank), "regions": regions,
            "a_lines": side_lines(pair.a, [(i, *r.a_lines) for i, r in numbered]),
            "b_lines": side_lines(pair.b, [(i, *r.b_lines) for i, r in numbered]),
            "colours": COLOURS}


def render_index(report: Report, pair_href: str, policy: str = "", back: tuple[str, str] | None = None,
                 pseudonymous: bool = False) -> str:
    """The ranked pairs; `pair_href` is the link to a pair's page with `{rank}` in it."""
    data = report_dict(report, policy)
    return environment().get_template("similarity_index.html.j2").render(
        s=data, pair_href=pair_href, back=back, pseudonymous=pseudonymous)


def render_pair(report: Report, rank: int, index_href: str) -> str:
    return environment().get_template("similarity_pair.html.j2").render(
        v=pair_view(report, rank), exercise=report.exercise, index_href=index_href)


def write_folder(report: Report, out: Path, policy: str = "", pseudonymous: bool = False) -> Path:
    """index.html and pairs/<rank>.html, owner-only: the report names students and shows their code."""
    from grader.private_files import make_private_folder, write_private

    make_private_folder(out / "pairs")
    write_private(out / "index.html", render_index(report, "pairs/{rank}.html", policy, pseudonymous=pseudonymous))
    for rank in range(1, len(report.pairs) + 1):
        write_private(out / "pairs" / f"{rank}.html", render_pair(report, rank, "../index.html"))
    return out / "index.html"
