"""Deep Linking: the instructor picks an exercise in the LMS, and the tool answers the platform with a
signed LtiDeepLinkingResponse holding a resource link that launches that exercise and a line item for
its grades, worth the exercise's full points."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from grader.core.exercise import Exercise
from grader.core.grading import new_scorecard
from grader.course.store import Store
from grader.lti.keys import random_token, tool_key
from grader.lti.launch import CLAIM, DL_CLAIM, Launch

RESPONSE_SECONDS = 600  # the page of choices may stay open this long before a pick is sent


def full_points(exercise: Exercise) -> int:
    """The whole exercise's points: those of its largest tier and of the tests that tier does not run."""
    return new_scorecard(exercise, exercise.top_tier, "lti").exercise_max_score


def launch_url(base_url: str, exercise: str) -> str:
    return f"{base_url.rstrip('/')}/lti/launch?{urlencode({'exercise': exercise})}"


def content_item(exercise: Exercise, base_url: str, points: int) -> dict[str, Any]:
    return {
        "type": "ltiResourceLink",
        "title": exercise.title,
        "url": launch_url(base_url, exercise.slug),
        "custom": {"exercise": exercise.slug},
        "lineItem": {"scoreMaximum": points, "label": exercise.title, "resourceId": exercise.slug,
                     "tag": "grader"},
        # A grader page signs in with its own cookie: in a window of its own, no browser keeps it from it.
        "window": {"targetName": "_blank"},
    }


def response_jwt(store: Store, launch: Launch, items: list[dict[str, Any]], now: float | None = None) -> str:
    """The LtiDeepLinkingResponse for the platform that sent the deep linking request `launch`."""
    moment = int(time.time() if now is None else now)
    platform = launch.platform
    claims: dict[str, Any] = {
        "iss": platform.client_id, "aud": platform.issuer, "iat": moment, "exp": moment + RESPONSE_SECONDS,
        "nonce": random_token(),
        CLAIM + "message_type": "LtiDeepLinkingResponse", CLAIM + "version": "1.3.0",
        CLAIM + "deployment_id": launch.deployment_id,
        DL_CLAIM + "content_items": items,
    }
    data = launch.deep_linking.get("data")
    if data is not None:  # the platform's own token for this request, given back as it came
        claims[DL_CLAIM + "data"] = data
    return tool_key(store).sign(claims)
