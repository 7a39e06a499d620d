"""Tiny statistics: implement mean() and spread(); the statement is in README.md."""


def mean(values: list[float]) -> float:
    raise NotImplementedError("mean")


def spread(values: list[float]) -> float:
    raise NotImplementedError("spread")
