"""Dedupe: implement dedupe(); the statement is in README.md."""


def dedupe(values: list[int]) -> list[int]:
    raise NotImplementedError("dedupe")
