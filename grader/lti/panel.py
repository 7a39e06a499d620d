"""The dashboard's LTI block: scores not sent to the LMS yet (with their last error), and the courses whose
learners can be added to the roster. Apart from the LTI routes, which are pages of the dashboard's own:
the dashboard reads this, and those routes answer with the dashboard.
"""

from __future__ import annotations

from typing import Any

from grader.course.store import Store
from grader.lti import ags, nrps
from grader.lti.platforms import platforms


def dashboard_panel(store: Store) -> dict[str, Any] | None:
    """What the dashboard shows of LTI; None when no platform is registered."""
    registered = platforms(store)
    if not registered:
        return None
    return {"platforms": len(registered), "sent": ags.sent_count(store), "pending": ags.pending(store),
            "courses": nrps.courses(store)}
