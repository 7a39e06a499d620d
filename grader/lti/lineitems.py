"""A line item's maximum kept to the exercise's: when the scores on their way to a column are out of
another maximum than the column's (a regrade after the exercise went from 88 to 90 points), the column is
read and written back with the new `scoreMaximum` (AGS line item service, PUT) before the score goes, so the
LMS never shows 90/88. What the platform was last told is kept (lti_line_items.score_maximum): a column
already right costs no call."""

from __future__ import annotations

from sqlalchemy import and_, select, update

from grader.course.store import Store
from grader.db import schema
from grader.lti.services import ServiceError, call, registered

LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"


def known_maximum(store: Store, platform_id: int, lineitem: str) -> tuple[float | None, bool]:
    """(the column's maximum as last read or set, None when never; whether the platform lets the tool
    change the column: the launches granted the line item scope)."""
    li = schema.lti_line_items
    with store.reading() as db:
        rows = db.execute(select(li.c.score_maximum, li.c.scopes).where(and_(
            li.c.platform_id == platform_id, li.c.lineitem == lineitem))).all()
    maximums = {row.score_maximum for row in rows}
    known = maximums.pop() if len(maximums) == 1 else None
    return known, any(LINEITEM_SCOPE in row.scopes.split() for row in rows)


def ensure_maximum(store: Store, platform_id: int, lineitem: str, maximum: float) -> bool:
    """Make the column's `scoreMaximum` `maximum`; whether it is (False: the platform did not grant the line
    item scope, so the column stays as the platform has it). ServiceError when the platform fails."""
    known, may_change = known_maximum(store, platform_id, lineitem)
    if known == maximum:
        return True
    if not may_change:
        return False
    platform = registered(store, platform_id)
    answer = call(store, platform, [LINEITEM_SCOPE], "GET", lineitem, accept=LINEITEM_TYPE)
    try:
        item = answer.json()
    except ValueError:
        item = None
    if not isinstance(item, dict):
        raise ServiceError(f"GET {lineitem}: the answer is not a line item")
    if item.get("scoreMaximum") != maximum:
        item["scoreMaximum"] = maximum
        call(store, platform, [LINEITEM_SCOPE], "PUT", lineitem, item, content_type=LINEITEM_TYPE,
             accept=LINEITEM_TYPE)
    li = schema.lti_line_items
    with store.transaction() as db:
        db.execute(update(li).where(and_(li.c.platform_id == platform_id, li.c.lineitem == lineitem))
                   .values(score_maximum=maximum))
    return True
