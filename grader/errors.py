"""Errors of the grader itself, as opposed to a submission's failures (which end up in scorecards)."""


class GradingError(Exception):
    """The grader cannot run: no such backend, Docker unreachable, image build failed, no interpreter."""


class SandboxUnavailable(GradingError):
    """The sandbox asked for cannot give untrusted code the isolation it promises on this machine."""


class StoreError(Exception):
    """The store cannot be used as asked: a bad student id, a newer schema, a broken file."""
