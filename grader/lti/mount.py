"""LTI in `grader serve`: its pages, the dashboard's block and the grades sent while the service runs, as
the web application takes them (`grader.web.app.LtiPages`), or None without the `lti` extra.

The one place that reaches for the extra: this module imports none of it until asked, so that a service
installed without PyJWT starts, with no LTI pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.web.app import LtiPages, Service

if TYPE_CHECKING:
    from grader.lti.ags import ScoreSync


def lti_missing(exc: ModuleNotFoundError) -> bool:
    """Whether the `lti` extra (PyJWT, cryptography) is what is missing: then the service has no LTI pages."""
    return (exc.name or "").partition(".")[0] in ("jwt", "cryptography")


def lti_pages() -> LtiPages | None:
    """What LTI adds to the service; None without the `lti` extra."""
    try:
        from grader.lti.panel import dashboard_panel
        from grader.lti.routes import lti_routes
    except ModuleNotFoundError as exc:
        if not lti_missing(exc):
            raise
        return None
    return LtiPages(routes=lti_routes(), panel=dashboard_panel, start=score_sync)


def score_sync(service: Service) -> ScoreSync:
    """The thread that sends grades to the LMSs' gradebooks (grader/lti/ags.py), started."""
    from grader.lti.ags import ScoreSync

    sync = ScoreSync(service.store, service.exercises)
    sync.start()
    return sync
