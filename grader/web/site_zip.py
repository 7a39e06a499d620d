"""The class site (grader.course.publish.build_site) as one zip file, made in memory, for an instructor to download
from the dashboard and put on any static host."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from grader.course.publish import build_site
from grader.course.store import Store, StoredSubmission

if TYPE_CHECKING:
    from collections.abc import Callable

    from grader.course.deadlines import Deadlines


def site_archive(store: Store, policy: str, pseudonymous: bool, deadlines: Deadlines | None = None,
                 include: Callable[[StoredSubmission], bool] | None = None) -> bytes:
    """The zip of the site: every file under its relative path (index.html, students/..., gradebooks), as
    `grader publish` would write it. Pseudonymous, no student id or roster name is in any file. `include`:
    the submissions it may hold (the dashboard's download: those whose results their students see whole)."""
    files = build_site(store, policy, pseudonymous, deadlines, include=include)
    stamp = datetime.now(timezone.utc).timetuple()[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in sorted(files.items()):
            entry = zipfile.ZipInfo(name, date_time=stamp)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16  # readable by all once unpacked: the site is for others
            archive.writestr(entry, content.encode("utf-8"))
    return buffer.getvalue()
